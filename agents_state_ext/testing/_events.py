"""The SSE events of a streamed response, in the order the real API sends them.

Event types and fields follow openai-python's ``types/responses/response_*_event.py`` [doc]
(``ResponseStreamEvent``); the order within an item is the one the openai ``responses.stream``
helper accumulates (``lib/streaming/responses/_responses.py``) [doc].
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ._replies import Reply, split_words

__all__ = ["build_events", "failed_response", "failure_event"]


class _Events:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, event_type: str, **fields: Any) -> None:
        self.events.append({"type": event_type, "sequence_number": len(self.events), **fields})


def _reasoning(out: _Events, index: int, item: Mapping[str, Any]) -> None:
    item_id = item.get("id")
    started = {k: copy.deepcopy(v) for k, v in item.items() if k != "encrypted_content"}
    started["summary"] = []
    out.add("response.output_item.added", output_index=index, item=started)
    for summary_index, part in enumerate(item.get("summary") or []):
        text = str(part.get("text", ""))
        where = {"item_id": item_id, "output_index": index, "summary_index": summary_index}
        out.add(
            "response.reasoning_summary_part.added",
            **where,
            part={"type": "summary_text", "text": ""},
        )
        for delta in split_words(text) or ("",):
            out.add("response.reasoning_summary_text.delta", **where, delta=delta)
        out.add("response.reasoning_summary_text.done", **where, text=text)
        out.add(
            "response.reasoning_summary_part.done",
            **where,
            part={"type": "summary_text", "text": text},
        )
    out.add("response.output_item.done", output_index=index, item=copy.deepcopy(item))


def _other(out: _Events, reply: Reply, index: int, item: Mapping[str, Any]) -> None:
    started = {**copy.deepcopy(item), "status": "in_progress"}
    if item.get("type") == "message":
        started["content"] = []
    elif item.get("type") == "function_call":
        started["arguments"] = ""
    out.add("response.output_item.added", output_index=index, item=started)
    if item.get("type") == "message":
        for delta in reply.deltas_for(index, item):
            out.add(
                "response.output_text.delta",
                item_id=item.get("id"),
                output_index=index,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
    out.add("response.output_item.done", output_index=index, item=copy.deepcopy(item))


def build_events(response: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The SSE events of a streamed response, the terminal event last.

    Order: ``response.created``; per output item ``response.output_item.added``, its content
    events, ``response.output_item.done``; then ``response.completed`` (``response.incomplete``
    for an incomplete reply). A reasoning item streams, per summary part,
    ``reasoning_summary_part.added``, ``reasoning_summary_text.delta`` (one per word chunk),
    ``reasoning_summary_text.done`` and ``reasoning_summary_part.done``.
    """
    out = _Events()
    created = {**copy.deepcopy(response), "status": "in_progress", "output": [], "usage": None}
    out.add("response.created", response=created)
    for index, item in enumerate(response["output"]):
        if item.get("type") == "reasoning":
            _reasoning(out, index, item)
        else:
            _other(out, reply, index, item)
    out.add(f"response.{response['status']}", response=copy.deepcopy(response))
    return out.events


def failure_event(
    events: list[dict[str, Any]],
    after: int,
    *,
    kind: str,
    response: Mapping[str, Any],
    message: str,
    code: str | None,
) -> list[dict[str, Any]]:
    """The first ``after`` events (never the terminal one), then the failure event.

    ``error``: ``{"type": "error", "code", "message", "param", "sequence_number"}`` [doc:
    ``ResponseErrorEvent``]. ``response.failed``: the response with status ``failed``, an
    ``error`` ``{code, message}`` [doc: ``ResponseError``], the output items already done and
    no usage [inf].
    """
    kept = copy.deepcopy(events[: min(after, len(events) - 1)])
    sequence = len(kept)
    if kind == "stream_error":
        kept.append(
            {
                "type": "error",
                "code": code,
                "message": message,
                "param": None,
                "sequence_number": sequence,
            }
        )
        return kept
    done = [e["item"] for e in kept if e["type"] == "response.output_item.done"]
    failed = failed_response(response, message=message, code=code, output=done)
    kept.append({"type": "response.failed", "sequence_number": sequence, "response": failed})
    return kept


def failed_response(
    response: Mapping[str, Any], *, message: str, code: str | None, output: list[Any]
) -> dict[str, Any]:
    """``response`` as failed: status ``failed``, an ``error`` ``{code, message}`` [doc:
    ``ResponseError``], ``output`` (the items already done) and no usage [inf]."""
    return {
        **copy.deepcopy(dict(response)),
        "status": "failed",
        "error": {"code": code or "server_error", "message": message},
        "output": output,
        "usage": None,
    }
