"""The SSE events of a streamed response, in the order the real API sends them.

Sources. Event types and fields: openai-python's ``types/responses/response_*_event.py``
(``ResponseStreamEvent``) [doc]. The order: the openai ``responses.stream`` helper
(``lib/streaming/responses/_responses.py``, ``ResponseStreamState.accumulate_event``) [doc]
needs ``response.created`` first, ``response.output_item.added`` before any event of that
item, and ``response.content_part.added`` before the ``output_text.delta`` that indexes into
the part (it reads ``output.content[content_index]``). The API reference's streaming example
[doc] shows ``response.in_progress`` right after ``response.created``, and, per message,
``output_item.added``, ``content_part.added``, the deltas, ``output_text.done``,
``content_part.done``, ``output_item.done``. A function call streams
``function_call_arguments.delta`` then ``function_call_arguments.done`` (``arguments``; the
installed openai's event has no ``name``) [doc]. A content part starts empty
(``text: ""``, ``annotations: []``, ``logprobs: []``) [obs: the API reference's example].
How the real API cuts a text or the arguments into deltas is unknown; the mock cuts at words
(at most three deltas) [inf].
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


def _content_part(
    out: _Events, where: Mapping[str, Any], part: Mapping[str, Any], deltas: tuple[str, ...]
) -> None:
    """One part of a message: ``output_text`` (text deltas) or ``refusal`` (refusal deltas)."""
    refusal = part.get("type") == "refusal"
    if refusal:
        text = str(part.get("refusal", ""))
        empty: dict[str, Any] = {"type": "refusal", "refusal": ""}
        done: dict[str, Any] = {"type": "refusal", "refusal": text}
    else:
        text = str(part.get("text", ""))
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        done = {"logprobs": [], **copy.deepcopy(dict(part))}
    out.add("response.content_part.added", **where, part=empty)
    if refusal:
        for delta in split_words(text):
            out.add("response.refusal.delta", **where, delta=delta)
        out.add("response.refusal.done", **where, refusal=text)
    else:
        for delta in deltas:
            out.add("response.output_text.delta", **where, delta=delta, logprobs=[])
        out.add("response.output_text.done", **where, text=text, logprobs=[])
    out.add("response.content_part.done", **where, part=done)


def _message(out: _Events, reply: Reply, index: int, item: Mapping[str, Any]) -> None:
    parts = [p for p in item.get("content") or [] if isinstance(p, Mapping)]
    for content_index, part in enumerate(parts):
        where = {"item_id": item.get("id"), "output_index": index, "content_index": content_index}
        if len(parts) == 1:
            deltas = reply.deltas_for(index, item)  # a scripted reply's chunks
        else:
            deltas = split_words(str(part.get("text", "")))
        _content_part(out, where, part, deltas)


def _other(out: _Events, reply: Reply, index: int, item: Mapping[str, Any]) -> None:
    kind = item.get("type")
    started = copy.deepcopy(dict(item))
    if "status" in item:  # a custom tool call has none [doc: ``ResponseCustomToolCall``]
        started["status"] = "in_progress"
    if kind == "message":
        started["content"] = []
    elif kind == "function_call":
        started["arguments"] = ""
    elif kind == "custom_tool_call":
        started["input"] = ""
    out.add("response.output_item.added", output_index=index, item=started)
    where = {"item_id": item.get("id"), "output_index": index}
    if kind == "message":
        _message(out, reply, index, item)
    elif kind == "function_call":
        arguments = str(item.get("arguments", ""))
        for delta in split_words(arguments):
            out.add("response.function_call_arguments.delta", **where, delta=delta)
        out.add("response.function_call_arguments.done", **where, arguments=arguments)
    elif kind == "custom_tool_call":
        text = str(item.get("input", ""))
        for delta in split_words(text):
            out.add("response.custom_tool_call_input.delta", **where, delta=delta)
        out.add("response.custom_tool_call_input.done", **where, input=text)
    out.add("response.output_item.done", output_index=index, item=copy.deepcopy(item))


def build_events(response: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """The SSE events of a streamed response, the terminal event last.

    Order: ``response.created``, ``response.in_progress`` (both with status ``in_progress``,
    no output, no usage); per output item ``response.output_item.added``, its content events,
    ``response.output_item.done``; then ``response.completed`` (``response.incomplete`` for an
    incomplete reply). A message streams, per content part, ``content_part.added``,
    ``output_text.delta`` (one per word chunk, or the reply's ``chunks``),
    ``output_text.done`` and ``content_part.done`` (a refusal part: ``refusal.delta`` and
    ``refusal.done``); a function call ``function_call_arguments.delta`` (per word chunk of
    the arguments) and ``function_call_arguments.done``; a custom tool call
    ``custom_tool_call_input.delta``/``.done``. A reasoning item streams, per summary part,
    ``reasoning_summary_part.added``, ``reasoning_summary_text.delta`` (one per word chunk),
    ``reasoning_summary_text.done`` and ``reasoning_summary_part.done``.
    """
    out = _Events()
    created = {
        **copy.deepcopy(response),
        "status": "in_progress",
        "incomplete_details": None,
        "output": [],
        "usage": None,
    }
    out.add("response.created", response=created)
    out.add("response.in_progress", response=copy.deepcopy(created))
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
