"""The scripted runs of the interruption suite: their agents, tools and deterministic model.

The model's answer follows from the server-side context alone, so a turn that is asked again
after an interruption repeats exactly (same call ids, same text). User texts are tags that are
distinct per run (``w-3`` warm-up, ``x-3`` the scripted input, ``l-3`` a message staged on its
paused RunState, ``f-3`` the follow-up); only an ``x-`` turn plays the script's tool round, every
other turn is answered ``answer to <tag>``, so each answer names the turn it belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agents import Agent, RunConfig, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.tool import Tool
from agents.tool_context import ToolContext

from agents_state_ext.testing import MockResponsesAPI, Reply, ResponseContext

__all__ = [
    "SCRIPTS",
    "Reporter",
    "Script",
    "answer",
    "build_agent",
    "call_id",
    "responder_by_tag",
    "user_tag",
]


class Reporter(Protocol):
    """What the suite's tools report to: the point where they start.

    That a call finished is reported by the run's ``on_tool_end`` hook (``ProbeHooks``), once
    the SDK holds the tool's result: a value still inside the tool body is not an output yet.
    """

    async def reached(self, label: str) -> None:
        """An interruption point: the tool has started."""


SCRIPT_PREFIX = "x-"


@dataclass(frozen=True)
class Script:
    """One scripted run: the tool calls of its single tool round (none: a plain text turn)."""

    name: str
    calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    pauses: bool = False
    """The round needs approval: the run returns, is approved and resumed (two results)."""
    handoff: bool = False
    as_tool: bool = False
    filtered: bool = False
    """A ``call_model_input_filter`` that returns new item dicts (user text upper-cased)."""
    reasoning: bool = False
    """Every answer of its turns comes as a reasoning model's: a reasoning item first."""
    late_input: bool = False
    """At its pause the app also stages a late user message on the RunState
    (``RunState.add_input``): the run answers that message (``l-N``) once resumed."""

    def responder(self, context: ResponseContext) -> Reply:
        """The model: the script's tool round for an ``x-`` turn, else the turn's answer."""
        items = list(context.items)
        start = _last_user_index(items)
        tag = user_tag(items[start]) if start is not None else ""
        answered = items[start + 1 :] if start is not None else items
        outputs = sum(1 for item in answered if item.get("type") == "function_call_output")
        if not tag.startswith(SCRIPT_PREFIX) or not self.calls or outputs:
            # Two deltas: a point between deltas and one after the last, no more.
            combined = Reply.text(answer(tag), chunks=(answer(""), tag))
        else:
            replies = [
                Reply.tool_call(name, _arguments(args, tag), call_id=call_id(tag, index))
                for index, (name, args) in enumerate(self.calls)
            ]
            combined = replies[0]
            for reply in replies[1:]:
                combined = combined + reply
        return Reply.reasoning(f"plan {tag}") + combined if self.reasoning else combined

    def agent(self, mock: MockResponsesAPI, reporter: Reporter) -> Agent[Any]:
        """The run's starting agent, its tools reporting to ``reporter``."""
        return build_agent(mock, reporter, [self])

    def run_kwargs(self) -> dict[str, Any]:
        """Runner keyword arguments every run of this script gets."""
        if not self.filtered:
            return {}
        return {"run_config": RunConfig(call_model_input_filter=shout)}


def build_agent(
    mock: MockResponsesAPI, reporter: Reporter, scripts: Iterable[Script]
) -> Agent[Any]:
    """A starting agent with every tool, handoff and sub-agent ``scripts`` call."""
    scripts = list(scripts)
    names = {name for script in scripts for name, _ in script.calls}
    tools: list[Tool] = [make(reporter) for name, make in _TOOLS.items() if name in names]
    handoffs: list[Any] = []
    if any(script.handoff for script in scripts):
        handoffs.append(Agent(name="specialist", model=mock.model()))
    if any(script.as_tool for script in scripts):
        helper = Agent(name="helper", model=mock.model())
        tools.append(helper.as_tool(tool_name="ask_helper", tool_description="Ask a helper."))
    return Agent(name="main", model=mock.model(), tools=tools, handoffs=handoffs)


def responder_by_tag(context: ResponseContext) -> Reply:
    """The model for turns of any script: ``x-...<name>`` plays script ``<name>``'s round."""
    start = _last_user_index(list(context.items))
    tag = user_tag(context.items[start]) if start is not None else ""
    name = tag.rsplit(".", 1)[-1]
    return SCRIPTS.get(name, SCRIPTS["text"]).responder(context)


def user_tag(item: Mapping[str, Any]) -> str:
    """The (case-folded) text of a user message: the tag of its turn."""
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(str(part.get("text", "")) for part in content)
    return str(content or "").casefold()


def answer(tag: str) -> str:
    """The assistant text that answers the turn ``tag``."""
    return f"answer to {tag}"


def call_id(tag: str, index: int) -> str:
    """The call id of the ``index``-th call of turn ``tag``'s tool round."""
    return f"call_{tag}_{index}"


def shout(data: CallModelData[Any]) -> ModelInputData:
    """A rewriting input filter: new dicts for every item, user text upper-cased."""
    items = [_shouted(dict(item)) for item in data.model_data.input]  # type: ignore[call-overload]
    return ModelInputData(input=items, instructions=data.model_data.instructions)  # type: ignore[arg-type]


def _shouted(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("role") != "user":
        return item
    content = item.get("content")
    if isinstance(content, str):
        return {**item, "content": content.upper()}
    if isinstance(content, list):
        parts = [{**part, "text": str(part.get("text", "")).upper()} for part in content]
        return {**item, "content": parts}
    return item


def _last_user_index(items: list[dict[str, Any]]) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("type", "message") == "message" and item.get("role") == "user":
            return index
    return None


def _arguments(args: Mapping[str, Any], tag: str) -> dict[str, Any]:
    return {key: str(value).format(tag=tag) for key, value in args.items()}


def _lookup(reporter: Reporter) -> Tool:
    @function_tool
    async def lookup(ctx: ToolContext[Any], city: str) -> str:
        """Weather for a city."""
        await reporter.reached(f"inside tool lookup({city})")
        return f"sunny in {city}"

    return lookup


def _delete_file(reporter: Reporter) -> Tool:
    @function_tool(needs_approval=True)
    async def delete_file(ctx: ToolContext[Any], path: str) -> str:
        """Delete a file (needs approval)."""
        await reporter.reached(f"inside tool delete_file({path})")
        return f"deleted {path}"

    return delete_file


_TOOLS: dict[str, Callable[[Reporter], Tool]] = {"lookup": _lookup, "delete_file": _delete_file}

SCRIPTS: dict[str, Script] = {
    script.name: script
    for script in (
        Script("text"),
        Script("tool", calls=(("lookup", {"city": "Paris"}),)),
        Script("parallel", calls=(("lookup", {"city": "Paris"}), ("lookup", {"city": "Rome"}))),
        Script("approval", calls=(("delete_file", {"path": "/tmp/{tag}"}),), pauses=True),
        Script("handoff", calls=(("transfer_to_specialist", {}),), handoff=True),
        Script("as_tool", calls=(("ask_helper", {"input": "sub {tag}"}),), as_tool=True),
        Script("filter", calls=(("lookup", {"city": "Oslo"}),), filtered=True),
        # [reasoning, call], then [reasoning, message]: a reasoning model's tool round.
        Script("reasoning", calls=(("lookup", {"city": "Lima"}),), reasoning=True),
        # The approval pause with a late user message staged on the RunState: after it the
        # approved tool's output and that message are pending together (issue 29 item 4).
        Script(
            "late_input",
            calls=(("delete_file", {"path": "/tmp/{tag}"}),),
            pauses=True,
            late_input=True,
        ),
    )
}
"""Every scripted run, by name."""
