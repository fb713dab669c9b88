"""Run hooks that tell the ledger each tool output the moment the tool returns.

A run cancelled before its next request (a non-streamed run has no result to read afterwards),
or a parallel sibling cancelled mid-call, would otherwise lose outputs that were produced: the
ledger keeps them to close their calls with. The app's own hooks are called as before.

When the ledger is held in a store (``RunLifecycle.checkpoint_hook``), it is also saved when
an agent starts, before each model request's hooks and after each tool output, before the
app's hook runs: a worker that dies there leaves the run's input and its tools' outputs saved.
"""

from __future__ import annotations

from typing import Any

from agents import RunHooks
from agents.items import ItemHelpers
from agents.tool import FunctionTool
from openai.types.responses import ResponseFunctionToolCall

from ._run import RunLifecycle

__all__ = ["ToolOutputHooks"]

_FORWARDED = (
    "on_llm_end",
    "on_agent_end",
    "on_handoff",
    "on_tool_start",
)


class ToolOutputHooks(RunHooks[Any]):
    """``RunHooks`` that record function tool outputs in ``lifecycle``, then call ``inner``."""

    def __init__(self, inner: RunHooks[Any] | None, lifecycle: RunLifecycle) -> None:
        self.inner = inner
        self.lifecycle = lifecycle

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        """Record the output of a function tool call, then call the app's hook."""
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(tool, FunctionTool) and isinstance(call_id, str):
            self.lifecycle.tool_finished(_output_item(call_id, tool, context, result))
            await self.lifecycle.checkpoint()
        if self.inner is not None:
            await self.inner.on_tool_end(context, agent, tool, result)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        """Save a held ledger (the run's input), then call the app's hook."""
        await self.lifecycle.checkpoint()
        if self.inner is not None:
            await self.inner.on_agent_start(context, agent)

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: str | None, input_items: Any
    ) -> None:
        """Save a held ledger, then call the app's hook."""
        await self.lifecycle.checkpoint()
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)


def _output_item(call_id: str, tool: FunctionTool, context: Any, result: object) -> Any:
    """The output item the SDK sends for ``result``: built directly for the common text result
    (what the SDK's conversion gives for a ``str``), through the SDK's conversion otherwise."""
    if isinstance(result, str) and tool.output_json_schema is None:
        return {"call_id": call_id, "output": result, "type": "function_call_output"}
    call = ResponseFunctionToolCall(
        type="function_call",
        call_id=call_id,
        name=tool.name,
        arguments=str(getattr(context, "tool_arguments", None) or "{}"),
    )
    return ItemHelpers.tool_call_output_item(call, result)


def _forward(name: str) -> Any:
    async def forward(self: ToolOutputHooks, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args, **kwargs)

    forward.__name__ = name
    forward.__doc__ = f"Call the app's ``{name}`` hook."
    return forward


for _name in _FORWARDED:
    setattr(ToolOutputHooks, _name, _forward(_name))
