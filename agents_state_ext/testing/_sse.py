"""Response objects and their Server-Sent-Events rendering."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx2

from ._items import CREATED_AT, IdMinter, item_text
from ._reasoning import ENCRYPTED_MARKER, encode_reasoning, reasoning_template, summary_text
from ._replies import Reply, Usage
from ._state import PreparedRequest

__all__ = [
    "SSEStream",
    "default_usage",
    "materialize",
    "response_json",
    "with_reasoning",
]


def with_reasoning(reply: Reply) -> Reply:
    """``reply`` led by one reasoning item, unless it holds one already."""
    if reply.has_reasoning:
        return reply
    return Reply(output=(reasoning_template("Thinking."),)) + reply


def materialize(
    reply: Reply, ids: IdMinter, *, include_encrypted: bool = False
) -> list[dict[str, Any]]:
    """The reply's output items with fresh server ids (and ``call_N`` call ids where missing).

    A reasoning item gets ``encrypted_content`` when ``include_encrypted`` (the request's
    ``include`` asked for it) unless its template opted out. Every ``output_text`` part gets
    ``logprobs: []`` unless scripted with its own: the API sends it when ``include`` does not
    ask for ``message.output_text.logprobs`` [doc: openai-openapi ``OutputTextContent``
    requires ``logprobs``; the Response examples there carry ``"logprobs": []``].
    """
    output: list[dict[str, Any]] = []
    for template in reply.output:
        item = ids.assign(copy.deepcopy(template))
        wanted = item.pop(ENCRYPTED_MARKER, True) is not False and include_encrypted
        if item.get("type") == "reasoning" and wanted:
            item["encrypted_content"] = encode_reasoning(str(item["id"]), item["summary"])
        if item.get("type") == "function_call" and not item.get("call_id"):
            rebuilt: dict[str, Any] = {}
            for key, value in item.items():
                rebuilt[key] = value
                if key == "id":
                    rebuilt["call_id"] = ids.mint("call")
            item = rebuilt
        elif item.get("type") == "function_call":
            ids.claim(str(item["call_id"]))
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    part.setdefault("logprobs", [])
        output.append(item)
    return output


def _words(items: Sequence[Mapping[str, Any]]) -> int:
    count = 0
    for item in items:
        count += len(item_text(item).split())
        count += len(str(item.get("arguments", "")).split())
        count += len(str(item.get("output", "")).split())
    return count


def default_usage(
    context: Sequence[Mapping[str, Any]], output: Sequence[Mapping[str, Any]]
) -> Usage:
    """Deterministic usage: the word counts of the context and of the output (at least 1).

    A reasoning item's summary words count as ``reasoning_tokens`` (at least 1 per reasoning
    item), included in ``output_tokens`` as the API reports them [doc: ``ResponseUsage``].
    """
    summaries = [summary_text(item) for item in output if item.get("type") == "reasoning"]
    reasoning = sum(max(1, len(text.split())) for text in summaries)
    return Usage(
        input_tokens=max(1, _words(context)),
        output_tokens=max(1, _words(output)) + reasoning,
        reasoning_tokens=reasoning,
    )


def response_json(
    prepared: PreparedRequest,
    output: list[dict[str, Any]],
    *,
    model: str,
    status: str = "completed",
    usage: Usage | None = None,
) -> dict[str, Any]:
    """The ``Response`` object, echoing the request's settings as the real API does."""
    body = prepared.body
    conversation = {"id": prepared.conversation_id} if prepared.conversation_id else None
    return {
        "id": prepared.response_id,
        "object": "response",
        "created_at": CREATED_AT,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "model": body.get("model") or model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": prepared.previous_response_id,
        "conversation": conversation,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": prepared.store,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation") or "disabled",
        "usage": usage.to_json() if usage is not None else None,
        "user": body.get("user"),
    }


def _frame(event: Mapping[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _event_type(event: Mapping[str, Any]) -> str:
    return str(event["type"])


class SSEStream(httpx2.AsyncByteStream):
    """An SSE body produced lazily, so cancels and drops happen between frames.

    ``on_complete`` runs when the terminal frame (the last one, ``response.completed``) is
    produced; ``on_abort`` runs once if the body is closed, cancelled or dropped before that.
    ``before_frame(index)`` is awaited before frame ``index`` is sent, and once more with
    ``len(events)`` when the client reads on after the last frame; ``sent`` collects the types
    of the frames sent. ``render`` writes one frame (default: the Responses API's
    ``event:``/``data:`` pair) and ``label`` names it in ``sent`` (default: its ``type``).
    """

    def __init__(
        self,
        events: Sequence[Mapping[str, Any]],
        *,
        delay: float,
        drop_after: int | None,
        on_complete: Callable[[], None],
        on_abort: Callable[[], None],
        sent: list[str] | None = None,
        before_frame: Callable[[int], Awaitable[None]] | None = None,
        render: Callable[[Mapping[str, Any]], bytes] = _frame,
        label: Callable[[Mapping[str, Any]], str] = _event_type,
    ) -> None:
        self._events = events
        self._render = render
        self._label = label
        self._delay = delay
        self._drop_after = drop_after
        self._on_complete = on_complete
        self._on_abort = on_abort
        self._sent = sent if sent is not None else []
        self._before_frame = before_frame
        self._done = False
        self._iterated = False

    def _finish(self, completed: bool) -> None:
        if self._done:
            return
        self._done = True
        (self._on_complete if completed else self._on_abort)()

    def _drop(self) -> httpx2.RemoteProtocolError:
        if not self._done:
            self._finish(completed=False)
        return httpx2.RemoteProtocolError(
            "peer closed connection without sending complete message body"
        )

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._iterated:  # a client draining the body after its end marker reads nothing more
            return
        self._iterated = True
        try:
            for index, event in enumerate(self._events):
                if index == self._drop_after:
                    raise self._drop()
                if index and self._delay:
                    await asyncio.sleep(self._delay)
                if self._before_frame is not None:
                    await self._before_frame(index)
                if index == len(self._events) - 1:
                    self._finish(completed=True)
                self._sent.append(self._label(event))
                yield self._render(event)
            if self._before_frame is not None:
                await self._before_frame(len(self._events))
            if self._drop_after is not None:
                raise self._drop()
        except BaseException:
            self._finish(completed=False)
            raise

    async def aclose(self) -> None:
        """Closing before the terminal frame counts as a client disconnect."""
        self._finish(completed=False)
