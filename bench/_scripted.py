"""A scripted tool-call run shared by the tracker and wrapper benchmarks, and a call recorder.

The run: the user asks once; responses 1..N each call the ``lookup_order`` tool (every
``message_every``-th also carries a short message before the call); response N + 1 answers in
text. :class:`CannedModel` plays it without a network, and :func:`response_output` builds the
same output objects for the benchmarks that drive a tracker by hand.

:func:`recording` records the top-level method calls a class receives (nested calls made by
the class itself are not recorded), summarised so that a real ``Runner.run`` and a benchmark's
hand-written driving sequence can be compared call by call.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from agents import function_tool
from agents.items import ModelResponse, RunItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

__all__ = [
    "PROMPT",
    "CannedModel",
    "lookup_order",
    "recording",
    "response_output",
    "summarise",
    "tool_result",
]

PROMPT = "Look up each order in turn and tell me which are late."


def tool_result(order_id: str) -> str:
    """What the tool returns for one order."""
    return f"{order_id}: shipped"


@function_tool
def lookup_order(order_id: str) -> str:
    """Status of one order."""
    return tool_result(order_id)


def _message(k: int, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{k}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def response_output(k: int, tool_calls: int, message_every: int = 0) -> list[Any]:
    """The output items of response ``k`` (1-based) of a run of ``tool_calls`` tool calls."""
    if k > tool_calls:
        return [_message(k, "All on time.")]
    output: list[Any] = []
    if message_every and k % message_every == 0:
        output.append(_message(k, f"Checked {k} orders so far."))
    output.append(
        ResponseFunctionToolCall(
            id=f"fc_{k}",
            call_id=f"call_{k}",
            type="function_call",
            name="lookup_order",
            arguments=f'{{"order_id": "ord_{k:05d}"}}',
            status="completed",
        )
    )
    return output


class CannedModel(Model):
    """No network: plays the scripted run; response ids ``resp_<k>`` never repeat."""

    def __init__(self, tool_calls: int, message_every: int = 0) -> None:
        self.tool_calls = tool_calls
        self.message_every = message_every
        self.calls = 0

    def _next(self) -> tuple[str, list[Any]]:
        self.calls += 1
        k = self.calls
        return f"resp_{k}", response_output(k, self.tool_calls, self.message_every)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response_id, output = self._next()
        return ModelResponse(output=output, usage=Usage(), response_id=response_id)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        response_id, output = self._next()
        response = Response(
            id=response_id,
            created_at=0,
            model="canned",
            object="response",
            output=output,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
            status="completed",
        )
        yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=0)
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=1
        )


def _item_kind(item: Any) -> Any:
    if isinstance(item, RunItem):
        raw = item.raw_item
        ident = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
        return (type(item).__name__, ident or getattr(raw, "id", None))
    if isinstance(item, dict):
        return (item.get("type", "message"), item.get("call_id") or item.get("id"))
    kind = getattr(item, "type", type(item).__name__)
    return (kind, getattr(item, "call_id", None) or getattr(item, "id", None))


def summarise(value: Any) -> Any:
    """A comparable summary of an argument: item kinds and ids, never object identities."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return "str"
    if isinstance(value, ModelResponse):
        return ("ModelResponse", value.response_id, tuple(_item_kind(i) for i in value.output))
    if isinstance(value, (list, tuple)):
        return tuple(summarise(v) for v in value)
    return _item_kind(value)


@contextmanager
def recording(cls: type) -> Iterator[list[tuple[Any, ...]]]:
    """Record the top-level calls of ``cls``'s public methods, summarised, while entered."""
    calls: list[tuple[Any, ...]] = []
    depth = [0]
    originals = {
        name: attr
        for name, attr in vars(cls).items()
        if callable(attr) and not name.startswith("_")
    }

    def wrap(name: str, method: Any) -> Any:
        @functools.wraps(method)
        def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0:
                summary = tuple(summarise(a) for a in args)
                named = tuple(sorted((k, summarise(v)) for k, v in kwargs.items()))
                calls.append((name, summary, named))
            depth[0] += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        return recorded

    for name, method in originals.items():
        setattr(cls, name, wrap(name, method))
    try:
        yield calls
    finally:
        for name, method in originals.items():
            setattr(cls, name, method)
