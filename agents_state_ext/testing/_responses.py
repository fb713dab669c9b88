"""``POST /responses``: scripted replies, injected faults, storage and streaming."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx2

from ._events import build_events, failed_response, failure_event
from ._faults import IN_STREAM_KINDS, Fault
from ._items import ApiError, json_response
from ._records import FrameHook, RecordedRequest
from ._replies import Reply, ResponseContext
from ._sse import SSEStream, default_usage, materialize, response_json, with_reasoning
from ._state import PreparedRequest, ServerState

__all__ = ["Responder", "ResponsesEndpoint", "default_reply", "fault_answer"]

Responder = Callable[[ResponseContext], Reply]


def default_reply(context: ResponseContext) -> Reply:
    """``"echo: <text of the last user message>"`` (input first, then history; else "")."""
    return Reply.text(f"echo: {context.last_user_text or ''}")


def _locked(conversation_id: str) -> ApiError:
    return ApiError(
        400,
        "Another process is currently operating on this conversation. Please retry in a few "
        "seconds.",
        param="conversation",
        code="conversation_locked",
    )


async def fault_answer(fault: Fault, request: httpx2.Request) -> httpx2.Response:
    """The client-visible side of a fault: an error response, or a raised transport error."""
    if fault.kind in IN_STREAM_KINDS:
        return ApiError(
            500,
            "The server had an error while processing your request. Sorry about that!",
            type="server_error",
        ).to_response()
    if fault.kind == "status":
        return ApiError(
            fault.status_code,
            fault.message,
            type=fault.resolved_error_type(),
            param=fault.error_param,
            code=fault.error_code,
            headers=fault.headers,
        ).to_response()
    if fault.kind == "timeout":
        if fault.seconds:
            await asyncio.sleep(fault.seconds)
        raise httpx2.ReadTimeout("Read timed out (injected)", request=request)
    if fault.kind == "connect_error":
        raise httpx2.ConnectError("Connection refused (injected)", request=request)
    raise httpx2.RemoteProtocolError(
        "Server disconnected without sending a response (injected).", request=request
    )


class ResponsesEndpoint:
    """The scripted model behind ``POST /responses`` and its queues."""

    def __init__(
        self,
        state: ServerState,
        *,
        model: str,
        store_interrupted_streams: bool,
        lock_conversations: bool,
        append_incomplete: bool,
    ) -> None:
        self.state = state
        self.model = model
        self.replies: deque[Reply] = deque()
        self.faults: deque[Fault] = deque()
        self.responder: Responder | None = None
        self.frame_hook: FrameHook | None = None
        self.calls = 0
        self._store_interrupted = store_interrupted_streams
        self._lock = lock_conversations
        self._append_incomplete = append_incomplete
        self._locked: set[str] = set()

    def _reply(self, prepared: PreparedRequest, consume: bool) -> Reply:
        context = ResponseContext(
            request=prepared.body,
            response_id=prepared.response_id,
            model=str(prepared.body.get("model") or self.model),
            streamed=prepared.streamed,
            history=tuple(prepared.history),
            input=tuple(prepared.input),
            previous_response_id=prepared.previous_response_id,
            conversation_id=prepared.conversation_id,
            call_index=self.calls,
        )
        self.calls += 1
        if self.replies:
            return self.replies.popleft() if consume else self.replies[0]
        return (self.responder or default_reply)(context)

    def _acquire(self, prepared: PreparedRequest) -> None:
        conversation_id = prepared.conversation_id
        if not self._lock or conversation_id is None:
            return
        if conversation_id in self._locked:
            raise _locked(conversation_id)
        self._locked.add(conversation_id)

    def _release(self, prepared: PreparedRequest) -> None:
        self._locked.discard(prepared.conversation_id or "")

    def _commit(self, prepared: PreparedRequest, response: dict[str, Any]) -> None:
        to_conversation = response["status"] == "completed" or self._append_incomplete
        self.state.commit(prepared, response, to_conversation=to_conversation)

    def _before_frame(self, record: RecordedRequest) -> Callable[[int], Awaitable[None]] | None:
        hook = self.frame_hook
        if hook is None:
            return None

        async def before_frame(index: int) -> None:
            await hook(record, index)

        return before_frame

    async def handle(
        self, request: httpx2.Request, body: Mapping[str, Any], record: RecordedRequest
    ) -> httpx2.Response:
        """Answer one ``POST /responses`` (raises for transport faults)."""
        fault = self.faults.popleft() if self.faults else None
        record.fault = fault
        record.streamed = bool(body.get("stream"))
        if fault is not None and fault.kind == "delay":
            await asyncio.sleep(fault.seconds)
            fault = None
        in_flight = ("drop_mid_stream", *IN_STREAM_KINDS)
        if fault is not None and not fault.commit and fault.kind not in in_flight:
            return await fault_answer(fault, request)

        prepared = self.state.prepare(body)
        record.response_id = prepared.response_id
        self._acquire(prepared)
        consume = fault is None or fault.commit
        try:
            reply = self._reply(prepared, consume)
            answer = with_reasoning(reply) if prepared.reasoning else reply
            output = materialize(
                answer, self.state.ids, include_encrypted=prepared.include_encrypted
            )
            self.state.note_output(prepared.response_id, output)
            usage = answer.usage or default_usage(prepared.history + prepared.input, output)
            response = response_json(
                prepared, output, model=self.model, usage=usage, status=answer.status
            )
        except BaseException:
            self._release(prepared)
            raise
        if prepared.streamed:
            return await self._stream(request, prepared, reply, answer, response, fault, record)
        try:
            if self.frame_hook is not None:
                await self.frame_hook(record, 0)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if fault is None or fault.commit:
                self._commit(prepared, response)
        finally:
            self._release(prepared)
        if fault is not None and fault.kind == "response_failed" and fault.failed_body:
            failed = failed_response(
                response, message=fault.message, code=fault.error_code, output=[]
            )
            return json_response(200, failed)
        if fault is not None:
            return await fault_answer(fault, request)
        return json_response(200, response)

    async def _stream(
        self,
        request: httpx2.Request,
        prepared: PreparedRequest,
        reply: Reply,
        answer: Reply,
        response: dict[str, Any],
        fault: Fault | None,
        record: RecordedRequest,
    ) -> httpx2.Response:
        committed = fault is not None and fault.commit
        if committed:
            self._commit(prepared, response)
        if fault is not None and fault.kind in IN_STREAM_KINDS:
            return self._failing_stream(prepared, answer, response, fault, record)
        if fault is not None and fault.kind != "drop_mid_stream":
            self._release(prepared)
            return await fault_answer(fault, request)

        def on_complete() -> None:
            self._release(prepared)
            if committed:
                return
            self._commit(prepared, response)
            if fault is not None and self.replies and self.replies[0] is reply:
                self.replies.popleft()  # a drop after completion consumed the reply after all

        def on_abort() -> None:
            self._release(prepared)
            if self._store_interrupted and not committed:
                self.state.commit(prepared, response, to_conversation=False)

        stream = SSEStream(
            build_events(response, answer),
            delay=reply.delay,
            drop_after=fault.after_events if fault is not None else None,
            on_complete=on_complete,
            on_abort=on_abort,
            sent=record.events,
            before_frame=self._before_frame(record),
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    def _failing_stream(
        self,
        prepared: PreparedRequest,
        answer: Reply,
        response: dict[str, Any],
        fault: Fault,
        record: RecordedRequest,
    ) -> httpx2.Response:
        """A 200 stream ending in ``error`` or ``response.failed``; nothing is stored."""

        def release() -> None:
            self._release(prepared)

        events = failure_event(
            build_events(response, answer),
            fault.after_events,
            kind=fault.kind,
            response=response,
            message=fault.message,
            code=fault.error_code,
        )
        stream = SSEStream(
            events,
            delay=answer.delay,
            drop_after=None,
            on_complete=release,
            on_abort=release,
            sent=record.events,
            before_frame=self._before_frame(record),
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
