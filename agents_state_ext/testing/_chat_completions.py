"""``POST /chat/completions``: a stateless fake of the Chat Completions API.

It answers from the same queues as ``POST /responses`` (replies, faults, responder, frame hook),
so a test scripts one mock whatever API its model speaks. A reply's messages become the
``content`` of the one choice, its function calls the ``tool_calls``; reasoning items have no
place in a chat completion and are left out. The server keeps nothing: the request's
``messages`` are the whole context the model sees, and what the model saw is read from the
request log (:attr:`MockResponsesAPI.chat_requests`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx2

from ._faults import IN_STREAM_KINDS, Fault
from ._items import CREATED_AT, IdMinter, item_text, json_response
from ._records import RecordedRequest
from ._replies import Reply, ResponseContext, Usage, split_words
from ._responses import ResponsesEndpoint, default_reply, fault_answer
from ._sse import SSEStream, default_usage, materialize

__all__ = ["ChatCompletionsEndpoint", "chat_items"]

_DONE: Mapping[str, Any] = {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def chat_items(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages in the Responses item shape, for a responder and for usage word counts."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": _text(message.get("content")),
                }
            )
            continue
        text = _text(message.get("content"))
        if text or role != "assistant":
            items.append({"type": "message", "role": role, "content": text})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments", ""),
                }
            )
    return items


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"audio_tokens": 0, "cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {
            "accepted_prediction_tokens": 0,
            "audio_tokens": 0,
            "reasoning_tokens": usage.reasoning_tokens,
            "rejected_prediction_tokens": 0,
        },
    }


def _tool_call(item: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": item["arguments"]},
    }


def _finish_reason(answer: Reply, output: Sequence[Mapping[str, Any]]) -> str:
    if answer.status == "incomplete":
        return "length"
    return "tool_calls" if any(i.get("type") == "function_call" for i in output) else "stop"


class _Answer:
    """One answer's parts, rendered as a ``ChatCompletion`` or as its chunks."""

    def __init__(
        self, completion_id: str, model: str, answer: Reply, output: list[dict[str, Any]]
    ) -> None:
        self.id = completion_id
        self.model = model
        self.answer = answer
        self.output = output
        self.finish_reason = _finish_reason(answer, output)

    def _head(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": CREATED_AT,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": None,
        }

    def completion(self, usage: Usage) -> dict[str, Any]:
        messages = [i for i in self.output if i.get("type") == "message"]
        calls = [_tool_call(i) for i in self.output if i.get("type") == "function_call"]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(item_text(m) for m in messages) if messages else None,
            "refusal": None,
            "annotations": [],
        }
        if calls:
            message["tool_calls"] = calls
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": self.finish_reason,
            "logprobs": None,
        }
        return {**self._head("chat.completion"), "choices": [choice], "usage": _usage_json(usage)}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {**self._head("chat.completion.chunk"), "choices": [choice]}

    def chunks(self, usage: Usage | None) -> list[Mapping[str, Any]]:
        """The stream: a role chunk, text deltas, per call its head then argument deltas, the
        finish chunk, the usage chunk (when asked for), then ``[DONE]``."""
        chunks: list[dict[str, Any]] = [
            self._chunk({"role": "assistant", "content": "", "refusal": None})
        ]
        calls = 0
        for index, item in enumerate(self.output):
            if item.get("type") == "message":
                for piece in self.answer.deltas_for(index, item):
                    chunks.append(self._chunk({"content": piece}))
            elif item.get("type") == "function_call":
                head = {**_tool_call(item), "index": calls}
                head["function"] = {"name": item["name"], "arguments": ""}
                chunks.append(self._chunk({"tool_calls": [head]}))
                for piece in split_words(str(item["arguments"])):
                    delta = {"index": calls, "function": {"arguments": piece}}
                    chunks.append(self._chunk({"tool_calls": [delta]}))
                calls += 1
        chunks.append(self._chunk({}, self.finish_reason))
        if usage is not None:
            for chunk in chunks:
                chunk["usage"] = None
            chunks.append(
                {**self._head("chat.completion.chunk"), "choices": [], "usage": _usage_json(usage)}
            )
        return [*chunks, _DONE]


def _render(chunk: Mapping[str, Any]) -> bytes:
    return b"data: [DONE]\n\n" if chunk is _DONE else f"data: {json.dumps(chunk)}\n\n".encode()


def _label(chunk: Mapping[str, Any]) -> str:
    if chunk is _DONE:
        return "[DONE]"
    if "error" in chunk:
        return "error"
    if not chunk["choices"]:
        return "chunk.usage"
    choice = chunk["choices"][0]
    if choice["finish_reason"] is not None:
        return "chunk.finish"
    delta = choice["delta"]
    if "tool_calls" in delta:
        return "chunk.tool_call" if "id" in delta["tool_calls"][0] else "chunk.arguments"
    return "chunk.role" if "role" in delta else "chunk.content"


def _error_chunk(fault: Fault) -> dict[str, Any]:
    return {
        "error": {
            "message": fault.message or "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": fault.error_code,
        }
    }


class ChatCompletionsEndpoint:
    """The scripted model behind ``POST /chat/completions``, on the Responses endpoint's queues."""

    def __init__(self, responses: ResponsesEndpoint, ids: IdMinter, *, model: str) -> None:
        self.responses = responses
        self.ids = ids
        self.model = model
        self._served = 0

    def _reply(self, body: Mapping[str, Any], completion_id: str, consume: bool) -> Reply:
        queue = self.responses
        context = ResponseContext(
            request=body,
            response_id=completion_id,
            model=str(body.get("model") or self.model),
            streamed=bool(body.get("stream")),
            input=tuple(chat_items(body.get("messages") or ())),
            history=(),
            call_index=queue.calls,
        )
        queue.calls += 1
        if queue.replies:
            return queue.replies.popleft() if consume else queue.replies[0]
        return (queue.responder or default_reply)(context)

    async def handle(
        self, request: httpx2.Request, body: Mapping[str, Any], record: RecordedRequest
    ) -> httpx2.Response:
        """Answer one ``POST /chat/completions`` (raises for transport faults)."""
        queue = self.responses
        fault = queue.faults.popleft() if queue.faults else None
        record.fault = fault
        record.streamed = streamed = bool(body.get("stream"))
        if fault is not None and fault.kind == "delay":
            await asyncio.sleep(fault.seconds)
            fault = None
        in_flight = ("drop_mid_stream", *IN_STREAM_KINDS)
        if fault is not None and not fault.commit and not (streamed and fault.kind in in_flight):
            return await fault_answer(fault, request)
        self._served += 1
        completion_id = f"chatcmpl-{self._served}"
        record.response_id = completion_id
        reply = self._reply(body, completion_id, consume=fault is None or fault.commit)
        output = [i for i in materialize(reply, self.ids) if i.get("type") != "reasoning"]
        model = str(body.get("model") or self.model)
        answer = _Answer(completion_id, model, reply, output)
        usage = reply.usage or default_usage(chat_items(body.get("messages") or ()), output)
        if not streamed:
            if queue.frame_hook is not None:
                await queue.frame_hook(record, 0)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if fault is not None:
                return await fault_answer(fault, request)
            return json_response(200, answer.completion(usage))
        if fault is not None and fault.kind not in in_flight:
            return await fault_answer(fault, request)
        options = body.get("stream_options") or {}
        chunks = answer.chunks(usage if options.get("include_usage") else None)
        drop_after = None
        if fault is not None and fault.kind in IN_STREAM_KINDS:
            chunks = [*chunks[: fault.after_events], _error_chunk(fault)]  # and no [DONE]
        elif fault is not None and fault.kind == "drop_mid_stream":
            drop_after = fault.after_events
        hook = queue.frame_hook

        async def before_frame(index: int) -> None:
            if hook is not None:
                await hook(record, index)

        stream = SSEStream(
            chunks,
            delay=reply.delay,
            drop_after=drop_after,
            on_complete=lambda: None,
            on_abort=lambda: None,
            sent=record.events,
            before_frame=before_frame if hook is not None else None,
            render=_render,
            label=_label,
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
