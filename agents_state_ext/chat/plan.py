"""What one chat attempt sends, decided before anything goes over the wire.

The builders each strategy composes its plan from (see :mod:`.strategies`):

- :func:`selected`: ``select_context`` over the chat's graph (or a path) within the budget
  (replay, and the session strategy, whose history part :func:`with_history` hands to the SDK);
- :func:`chained`: only the active user message (plus the system messages on a new chain),
  for a server that holds the branch up to the nearest *complete* assistant ancestor
  (:func:`nearest_complete_assistant`), so every branch has its own cursor and a cancelled or
  failed attempt is never continued from.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agents import ModelSettings
from agents.models.interface import Model
from pydantic import TypeAdapter

from .._attempts import AttemptDiff, AttemptRecord, explain
from .._context import ContextIndex, select_context
from .._graph import ConversationGraph
from .._items import copy_json
from .._nodes import Node, branch_status
from .._reasoning import Carried, self_contained
from .._tokens import MessageCounter
from ..errors import ContextOverflowError, GraphError

if TYPE_CHECKING:
    from .attempt import Attempt
    from .conversation import Conversation

__all__ = [
    "Plan",
    "Replay",
    "ReplayObstacle",
    "ReplayObstacleKind",
    "ReplayReport",
    "chained",
    "nearest_complete_assistant",
    "selected",
    "settings_from",
    "start_replay",
    "with_history",
]

_UNBOUNDED = sys.maxsize


@dataclass
class Plan:
    """The request of one attempt: the nodes sent, their counts, and the server cursor used.

    ``input`` is what goes to ``Runner`` (deep copies of the nodes' items). ``history`` is the
    part of a session-strategy selection the session hands to the SDK; ``seed`` the nodes a
    new server conversation would be seeded with; ``anchor`` the assistant node chained from.
    """

    nodes: list[Node]
    input: list[dict[str, Any]]
    tokens: dict[str, int]
    used: int
    budget: int | None
    overflow: bool
    cursor_before: str | None = None
    anchor: Node | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    seed: list[Node] = field(default_factory=list)
    reasoning: Carried = field(default_factory=Carried)
    """Reasoning items of the selected history sent inline, and left out (no encrypted
    content to send them with, or nothing after them: see :mod:`agents_state_ext._reasoning`)."""
    required: int | None = None
    """What the required parts need when that is not ``used``: a conversation strategy plan's
    seed of a new server conversation must fit as well as what is sent."""

    def ensure_sendable(self) -> Plan:
        """This plan, or :class:`ContextOverflowError` if its required parts exceed the budget."""
        if self.overflow:
            assert self.budget is not None  # nothing overflows no budget
            prompt = self.tokens[self.nodes[-1].id]  # the active user message ends a plan
            required = self.used if self.required is None else self.required
            raise ContextOverflowError.over(required, prompt, self.budget)
        return self


def nearest_complete_assistant(path: Sequence[Node]) -> Node | None:
    """The newest ``complete`` assistant node on ``path``: where a server chain continues.

    An edited-away answer on ``path`` counts as what it was before the edit: the person
    switched back to that version, so its chain (or server conversation) is continued.
    """
    for node in reversed(path):
        if node.role == "assistant" and branch_status(node) == "complete":
            return node
    return None


def _items(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    # Node items are JSON-shaped (the graph copies them in as such): copy_json is the cheap
    # deep copy of exactly that.
    return [copy_json(item) for node in nodes for item in node.items]


_NOT_A_USER = "an attempt answers the active user message, which must end the path"


def _checked(path: Sequence[Node]) -> Node:
    if not path or path[-1].role != "user":
        raise GraphError(_NOT_A_USER)
    return path[-1]


def _limit(budget: int | None) -> int:
    return _UNBOUNDED if budget is None else budget


def selected(
    source: Sequence[Node] | ConversationGraph,
    *,
    budget: int | None,
    counter: MessageCounter,
    index: ContextIndex | None = None,
    user_id: str | None = None,
) -> Plan:
    """The budgeted selection answering a user message, sent whole.

    ``source`` is the chat's graph, answering ``user_id`` (default: the active leaf): with the
    chat's ``index``, a build reads the graph's own active path and costs what it keeps, not
    the history's length. Or a path ending at the user message (``user_id`` not given).
    """
    if isinstance(source, ConversationGraph):
        user_id = source.active_leaf if user_id is None else user_id
        if user_id is None or source.get(user_id).role != "user":
            raise GraphError(_NOT_A_USER)
    else:
        _checked(source)
    selection = select_context(
        source, budget=_limit(budget), counter=counter, index=index, user_id=user_id
    )
    # History the chat sends itself must not lean on server storage (stored reasoning expires,
    # store=False keeps none, a re-seeded chain lost its own).
    items, carried = self_contained(_items(selection.nodes))
    return Plan(
        nodes=list(selection.nodes),
        input=items,
        reasoning=carried,
        tokens=dict(selection.tokens),
        used=selection.used,
        budget=budget,
        overflow=selection.overflow,
    )


def with_history(plan: Plan) -> Plan:
    """``plan`` split for a session: the history it hands the SDK, and the new user message.

    ``plan`` is as :func:`selected` built it: its ``input`` copies every selected item.
    """
    # plan.input is already a copy of every selected node's items: split it, no second copy.
    # The active user message is last and whole (self_contained never changes user items).
    cut = len(plan.input) - len(plan.nodes[-1].items) if plan.nodes else 0
    plan.history, plan.input = plan.input[:cut], plan.input[cut:]
    return plan


def chained(
    path: Sequence[Node], anchor: Node | None, *, budget: int | None, counter: MessageCounter
) -> Plan:
    """What a server holding the branch up to ``anchor`` lacks: the active user message.

    A new chain (no ``anchor``) starts with the branch's system messages as well.
    """
    _checked(path)
    if anchor is None:
        nodes = [n for n in path[:-1] if n.role == "system"] + [path[-1]]
    else:
        nodes = [path[-1]]
    tokens = {n.id: counter.count(n.id, n.items) for n in nodes}
    used = sum(tokens.values())
    return Plan(
        nodes=nodes,
        input=_items(nodes),
        tokens=tokens,
        used=used,
        budget=budget,
        overflow=used > _limit(budget),
        anchor=anchor,
    )


# -- replaying a recorded request --------------------------------------------------------------

ReplayObstacleKind = Literal[
    "overridden",
    "not_recorded",
    "part_missing",
    "chain_expired",
    "conversation_moved",
    "tools_changed",
    "context_changed",
]
"""Why a replay is not (or may not be) the recorded request byte for byte:

- ``overridden``: the caller changed the model, settings or instructions (the A/B case);
- ``not_recorded``: the record predates request digests, so nothing can be compared;
- ``part_missing``: the recorded instructions are not kept with the chat; the agent's are sent;
- ``chain_expired``: the server no longer knows the response the attempt chained from; the
  replay went out on a new chain seeded from the branch;
- ``conversation_moved``: the server conversation the attempt continued holds more now; the
  replay went out on a new one seeded with the same context;
- ``tools_changed``: the agent's tools differ from the recorded ones (tools are code: a replay
  sends the agent's own);
- ``context_changed``: the messages the context held differ (another budget or count).
"""


@dataclass(frozen=True)
class ReplayObstacle:
    """One reason a replay differs from its recorded request, and what was done instead."""

    kind: ReplayObstacleKind
    detail: str


@dataclass(frozen=True)
class ReplayReport:
    """How a replay went: both records, whether the requests were byte-identical, and why not.

    ``identical``: the rebuilt request's canonical digest equals the recorded one (model,
    settings, instructions, tools, input items, server cursor). ``differences`` is
    ``explain(original, replayed)``; ``obstacles`` say why the request could not be the same.
    """

    original: AttemptRecord
    replayed: AttemptRecord
    identical: bool
    differences: AttemptDiff
    obstacles: tuple[ReplayObstacle, ...] = ()

    def text(self) -> str:
        """A readable account: identical or not, each obstacle, each differing input."""
        head = f"replay of {self.original.attempt_id} as {self.replayed.attempt_id}: "
        head += "identical request" if self.identical else "request differs"
        lines = [head, f"  status: {self.replayed.status}"]
        if self.replayed.error:
            lines.append(f"  error: {self.replayed.error}")
        lines += [f"  {o.kind}: {o.detail}" for o in self.obstacles]
        if not self.identical and self.differences:
            lines += self.differences.text().splitlines()[1:]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


class Replay:
    """A replay in flight: its :attr:`attempt` runs; :meth:`report` waits and compares."""

    def __init__(
        self,
        chat: Conversation,
        original: AttemptRecord,
        attempt: Attempt,
        obstacles: list[ReplayObstacle],
    ) -> None:
        self._chat = chat
        self.original = original
        """The record of the attempt replayed."""
        self.attempt = attempt
        """The new sibling attempt (stream it, stop it, await it like any other)."""
        self.obstacles = obstacles
        """What is known before sending to keep the replay from being exact."""

    async def report(self) -> ReplayReport:
        """Wait for the attempt to end and compare its request with the recorded one.

        The attempt's own error is not raised here: it is in ``replayed.error``.
        """
        with contextlib.suppress(Exception):
            await self.attempt
        replayed = await self._chat.record(self.attempt.attempt_id)
        original = self.original
        obstacles = list(self.obstacles)
        if replayed.reseeded_from is not None and original.reseeded_from is None:
            obstacles.append(
                ReplayObstacle(
                    "chain_expired",
                    f"the server no longer knows {replayed.reseeded_from}; sent on a new chain "
                    "seeded from the branch",
                )
            )
        if (
            original.tools is not None or replayed.tools is not None
        ) and original.tools != replayed.tools:
            obstacles.append(ReplayObstacle("tools_changed", "the agent's tool definitions differ"))
        if original.included.keys() != replayed.included.keys() and original.sent is not None:
            obstacles.append(ReplayObstacle("context_changed", "the context held other messages"))
        identical = (
            original.request_digest is not None
            and original.request_digest == replayed.request_digest
        )
        return ReplayReport(
            original=original,
            replayed=replayed,
            identical=identical,
            differences=explain(original, replayed),
            obstacles=tuple(obstacles),
        )


def settings_from(recorded: Mapping[str, Any]) -> ModelSettings:
    """The ``ModelSettings`` a record's ``sampling`` describes (its JSON form, validated)."""
    known = {f.name for f in dataclasses.fields(ModelSettings)}
    data = {k: v for k, v in recorded.items() if k in known}
    return TypeAdapter(ModelSettings).validate_python(data)


def named(model: Any, name: str) -> Any:
    """``model`` sending ``name``: a copy of a ``Model`` with that name, or the name itself."""
    if isinstance(model, Model) and isinstance(getattr(model, "model", None), str):
        renamed = copy.copy(model)
        renamed.model = name  # type: ignore[attr-defined]
        return renamed
    return name


async def start_replay(
    chat: Conversation,
    original: AttemptRecord,
    *,
    model: str | None,
    model_settings: ModelSettings | None,
    instructions: str | None,
    stream: bool,
) -> Replay:
    """Start the replay of ``original`` on ``chat`` (see ``Conversation.replay``)."""
    agent = chat.agent
    assert agent is not None  # checked by the chat
    user_id = original.parent_user_id
    if user_id is None:
        raise GraphError(f"attempt {original.attempt_id} answers no user message")
    obstacles: list[ReplayObstacle] = []
    if original.request_digest is None:
        obstacles.append(
            ReplayObstacle(
                "not_recorded",
                "the record predates request recording: the agent's current request is sent",
            )
        )
    given = {"model": model, "settings": model_settings, "instructions": instructions}
    overrides = [name for name, value in given.items() if value is not None]
    if overrides:
        obstacles.append(ReplayObstacle("overridden", ", ".join(overrides) + " overridden"))
    changes: dict[str, Any] = {}
    if original.request_digest is not None:
        settings = settings_from(original.sampling)
        changes["model_settings"] = settings
        if original.instructions is None:
            changes["instructions"] = None
        else:
            try:
                changes["instructions"] = await chat.request_part(original.instructions)
            except KeyError:
                obstacles.append(
                    ReplayObstacle("part_missing", "the recorded instructions are not kept")
                )
    if model_settings is not None:
        base = changes.get("model_settings", agent.model_settings)
        changes["model_settings"] = base.resolve(model_settings)
    if instructions is not None:
        changes["instructions"] = instructions
    name = model or original.model
    config = chat.runner_kwargs.get("run_config")
    config_model = config.model if config is not None else None
    run_model: Any = None
    if (name is not None and original.request_digest is not None) or model is not None:
        assert name is not None
        if config_model is not None:
            run_model = named(config_model, name)
        else:
            changes["model"] = named(agent.model, name) if agent.model is not None else name
    replay_agent = agent.clone(**changes)
    path = chat.graph.path_to(user_id)
    expected = chat._strategy.cursor(path)
    if chat.strategy == "conversation" and original.cursor_before not in (None, expected):
        obstacles.append(
            ReplayObstacle(
                "conversation_moved",
                f"server conversation {original.cursor_before} holds more than this branch "
                "now; the replay goes out on one that holds exactly the same context",
            )
        )
    chat._check_idle("replay")
    leaf = chat.graph.active_leaf
    node = chat.graph.retry(user_id)
    attempt = chat._start(node, stream, leaf=leaf, agent=replay_agent, budget=original.budget)
    attempt.record.replay_of = original.attempt_id
    attempt.run_overrides = {"model": run_model, "pinned": original.request_digest is not None}
    return Replay(chat, original, attempt, obstacles)
