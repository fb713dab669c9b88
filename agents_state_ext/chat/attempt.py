"""``Attempt``: one assistant attempt of a chat, running as a task, streamed or not, stoppable."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import Agent
from agents.items import RunItem, ToolCallItem, ToolCallOutputItem
from agents.result import RunResultBase, RunResultStreaming
from agents.tracing import Trace, custom_span
from openai.types.responses import ResponseCreatedEvent, ResponseTextDeltaEvent

from .._attempts import AttemptRecord
from .._event_names import AttemptEventKind
from .._model import RequestTap
from .._nodes import Node, NodeStatus
from .._state import ConversationState
from .._tracing import RESEED_SPAN, attempt_trace
from .approvals import PendingApproval, read_approvals
from .plan import Plan
from .records import define_context, note_requests, recorded, response_id

if TYPE_CHECKING:
    from .conversation import Conversation

__all__ = ["Attempt", "AttemptEvent", "AttemptEventKind"]


@dataclass(frozen=True)
class AttemptEvent:
    """One thing an attempt did, for a UI that shows it live (see :meth:`Attempt.events`).

    ``status``: ``{"status"}``, when its start is stored (``queued``), when text starts to
    stream (``streaming``) and once at the end (its final status, once stored: not when the
    store refused it, see :attr:`Attempt.end_refused`). ``delta``: ``{"text"}``.
    ``tool_call``: ``{"call_id", "name", "arguments"}`` (the model asked for a tool).
    ``tool_result``: ``{"call_id", "output"}`` (the tool answered; ``output`` is text).
    """

    kind: AttemptEventKind
    data: dict[str, Any] = field(default_factory=dict)


class _Events:
    """One listener's queue of an attempt's events; iteration ends when the attempt does."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[AttemptEvent | None] = asyncio.Queue()

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> AttemptEvent:
        event = await self.queue.get()
        if event is None:
            raise StopAsyncIteration
        return event


class Attempt:
    """An assistant attempt in flight or finished; ``await attempt`` waits for it to end.

    ``Conversation.send`` / ``retry`` / ``edit`` / ``resume`` make one and start it in the
    running loop (a prompt over the budget makes none: they raise ``ContextOverflowError`` at
    once, nothing stored). Its task first stores the attempt's start (its ``queued`` node and
    record, one commit), then calls the model: what goes wrong before anything is sent is raised
    when the attempt is awaited (or iterated) — another handle having changed the chat
    (``ConcurrentUpdateError``, nothing stored), a resume the store no longer allows, a store
    that failed to write the start (its ``StoreError``; the attempt ends ``failed`` in memory
    and the handle's next commit stores it, see ``docs/attempts.md``).

    ``async for delta in attempt`` yields the answer's text as it arrives (one piece at the
    end when not streamed). :meth:`stop` cancels it; the text received so far is stored with
    status ``cancelled``. Awaiting a failed attempt raises its error, after it was stored as
    ``failed``; awaiting a stopped one returns normally, and so does awaiting one whose run
    stopped for tool approval: it is then ``awaiting_approval``, with its calls in
    :attr:`approvals` (decide them and ``Conversation.resume``).

    Under ``previous_response``, when the server no longer knows the response the attempt
    chains from, the attempt is sent once more on a new chain seeded from the branch
    (``AttemptRecord.reseeded_from``). When another handle on the same chat moved the branch
    head meanwhile, the attempt is still stored in its final status, off the active branch,
    and awaiting it raises ``ConcurrentUpdateError`` (or its own error if it failed).

    The attempt runs in one SDK trace of its own, named by ``AttemptRecord.trace_id`` from its
    start on (see ``docs/attempts.md``, tracing).
    """

    def __init__(
        self,
        chat: Conversation,
        node: Node,
        plan: Plan,
        record: AttemptRecord,
        *,
        agent: Agent[Any] | None,
        stream: bool,
        generation: int = 0,
        resume: bool = False,
        run: bool = True,
    ) -> None:
        self._chat = chat
        self.node = node
        self.plan = plan
        self.record = record
        self.agent = agent
        self.stream = stream
        self.error: BaseException | None = None
        self._deltas: asyncio.Queue[str | None] = asyncio.Queue()
        self._listeners: list[_Events] | None = []  # None once the attempt has ended
        self._stopping = False
        self._result: RunResultBase | None = None
        self._created_id: str | None = None
        self._call: asyncio.Task[RunResultBase] | None = None
        self.resumed = resume
        """Whether this attempt continues a run that waited for tool approval."""
        self.generation = generation  # the chat's generation when its start changed the graph
        self.stored = not run
        """Whether its start is in the store (``False``: refused before, nothing was stored)."""
        self.end_refused = False
        """Whether the store refused its end when it ended (``error`` says why): its final
        status was in memory only, so no final ``status`` event claimed it."""
        self.paused_run: str | None = None  # a resumed attempt's stored run, read at its start
        self.tap = RequestTap(request_id=record.request_id)
        """What this attempt's requests were, as they went out (see ``AttemptRecord``)."""
        self.parts: dict[str, Any] = {}  # request parts (digest -> value) to keep with the chat
        self.run_overrides: dict[str, Any] | None = None  # a replay's pinned run config
        self._started = asyncio.Event()  # its start is stored, or will never be
        self._task: asyncio.Task[None] | None = None  # None: it does not run in this handle
        if run:
            self._task = asyncio.get_running_loop().create_task(self._drive())
        else:
            self._started.set()
            self._deltas.put_nowait(None)
            self._listeners = None

    @classmethod
    def settled(cls, chat: Conversation, node: Node, record: AttemptRecord) -> Attempt:
        """A view of an attempt that does not run in this handle (parked, or ended)."""
        plan = Plan(nodes=[], input=[], tokens={}, used=0, budget=None, overflow=False)
        return cls(chat, node, plan, record, agent=chat.agent, stream=False, run=False)

    # -- reading -----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The graph node id of this attempt's assistant message."""
        return self.node.id

    @property
    def attempt_id(self) -> str:
        """The attempt id (also the key of its :class:`AttemptRecord`)."""
        return str(self.node.attempt_id)

    @property
    def user_id(self) -> str:
        """The user message this attempt answers."""
        return str(self.node.parent_id)

    @property
    def status(self) -> NodeStatus:
        """``queued``, ``streaming``, ``complete``, ``cancelled``, ``failed`` (or ``invalid``)."""
        return self.node.status

    @property
    def text(self) -> str:
        """The answer's text so far."""
        return self.node.text()

    @property
    def approvals(self) -> list[PendingApproval]:
        """The tool calls this attempt waits on while ``awaiting_approval`` (else ``[]``)."""
        return read_approvals(self.node) if self.status == "awaiting_approval" else []

    @property
    def done(self) -> bool:
        """Whether the attempt has ended and been stored."""
        return self._task is None or self._task.done()

    # -- waiting, streaming, stopping --------------------------------------------------------

    async def wait(self) -> Attempt:
        """Wait until the attempt has ended; re-raise its error (it failed, or lost a race)."""
        if self._task is not None:
            await asyncio.shield(self._task)
        if self.error is not None:
            raise self.error
        return self

    def __await__(self) -> Generator[Any, None, Attempt]:
        return self.wait().__await__()

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            delta = await self._deltas.get()
            if delta is None:
                return
            yield delta

    def events(self) -> AsyncIterator[AttemptEvent]:
        """The attempt's :class:`AttemptEvent` from now on: status, text, tool calls and results.

        Each call is a new listener, independent of ``async for delta in attempt`` and of other
        listeners; it sees what happens after the call (call it right after starting the
        attempt to see everything) and ends when the attempt has ended and been stored.
        """
        listener = _Events()
        if self._listeners is None:
            listener.queue.put_nowait(None)
        else:
            self._listeners.append(listener)
        return listener

    async def started(self) -> bool:
        """Wait until the attempt's start is stored, or refused; whether it was stored.

        ``False``: nothing of it was stored (awaiting it raises why). An attempt over its
        budget is stored, as ``failed``, and sends nothing.
        """
        await self._started.wait()
        return self.stored

    def _emit(self, kind: AttemptEventKind, **data: Any) -> None:
        for listener in self._listeners or ():
            listener.queue.put_nowait(AttemptEvent(kind, data))

    def _emit_items(self, items: list[RunItem]) -> None:
        # A resumed run's result holds the calls it waited on: they were announced before.
        announced = {a.get("call_id") for a in self.record.approvals} if self.resumed else set()
        for item in items:
            if isinstance(item, ToolCallItem):
                if item.call_id in announced:
                    continue
                raw = _raw(item.raw_item)
                arguments = raw.get("arguments", raw.get("action", ""))
                self._emit(
                    "tool_call",
                    call_id=item.call_id,
                    name=item.tool_name or raw.get("type"),
                    arguments=arguments if isinstance(arguments, str) else str(arguments),
                )
            elif isinstance(item, ToolCallOutputItem):
                output = _raw(item.raw_item).get("output", item.output)
                self._emit(
                    "tool_result",
                    call_id=item.call_id,
                    output=output if isinstance(output, str) else str(output),
                )

    async def stop(self) -> Attempt:
        """Cancel the attempt and wait until its partial answer is stored as ``cancelled``.

        Stopped before its request went out, the attempt sends nothing (its start is still
        stored, then its end as ``cancelled``).
        """
        if self._task is not None and not self._task.done():
            self._stopping = True
            self._cancel_call()
            await asyncio.wait([self._task])
        return self

    def _cancel_call(self) -> None:
        if isinstance(self._result, RunResultStreaming) and not self._result.is_complete:
            self._result.cancel()
        if self._call is not None:
            self._call.cancel()

    # -- running -----------------------------------------------------------------------------

    def _trace(self) -> Trace | None:
        """The trace this attempt runs in (``None``: the app's own, or none); names it.

        Grouped by the chat's id, with the message and attempt ids and the strategy in its
        metadata; a resumed attempt goes on in the trace its record names.
        """
        chat = self._chat
        metadata = {
            "message_id": self.id,
            "user_message_id": self.user_id,
            "attempt_id": self.attempt_id,
            "strategy": chat.strategy,
        }
        made, trace_id = attempt_trace(
            chat.runner_kwargs.get("run_config"),
            group_id=chat.id,
            metadata=metadata,
            trace_id=self.record.trace_id,
        )
        self.record.trace_id = trace_id
        return made

    async def _drive(self) -> None:
        # A resumed attempt learns its trace from its stored record (see _answer).
        made = None if self.resumed else self._trace()
        with made if made is not None else contextlib.nullcontext():
            await self._attempt()

    async def _attempt(self) -> None:
        chat = self._chat
        try:
            try:
                await chat._begin(self)
            finally:
                self._started.set()
            self._emit("status", status=self.status)
            result, state = await self._answer()
            await chat._complete(self, result, state)
        except asyncio.CancelledError:
            await self._settle_cancel()
            if not self._stopping:
                raise
        except Exception as exc:
            self.error = exc
            await chat._fail(self, exc)
        finally:
            try:
                await chat._released(self)
            finally:  # whatever the store did, iterating the attempt ends
                if not self.stream and self.status in ("complete", "awaiting_approval"):
                    self._deltas.put_nowait(self.text)
                    if self.text:
                        self._emit("delta", text=self.text)
                self._deltas.put_nowait(None)
                if self.stored and not self.end_refused:
                    self._emit("status", status=self.status)
                listeners, self._listeners = self._listeners or [], None
                for listener in listeners:
                    listener.queue.put_nowait(None)

    async def _answer(self) -> tuple[RunResultBase, ConversationState]:
        """Run the attempt, and once more on a new chain if the server lost its cursor."""
        chat = self._chat
        if self.paused_run is not None:
            state, run_state = await chat._parking.load(self, self.paused_run)
            made = self._trace()
            with made if made is not None else contextlib.nullcontext():
                return await self._call_model(state, run_state), state
        strategy = chat._strategy
        state, input = await strategy.state(self)
        await define_context(chat, self)
        try:
            return await self._call_model(state, input), state
        except Exception as exc:
            lost = strategy.lost_cursor(self, exc)
            if lost is None:
                raise
        if self._stopping:  # stopped while the lost request was failing: send nothing more
            raise asyncio.CancelledError
        data: dict[str, Any] = {
            "old_cursor": lost,
            "new_cursor": None,
            "message_id": self.id,
            "attempt_id": self.attempt_id,
        }
        with custom_span(RESEED_SPAN, data=data):
            await strategy.reseed(self, lost)
            data["seeded"] = list(self.record.included)
            state, input = await strategy.state(self)
            await define_context(chat, self)
            result = await self._call_model(state, input)
            data["new_cursor"] = response_id(result, state)
        return result, state

    async def _call_model(self, state: ConversationState, input: Any) -> RunResultBase:
        if self._stopping:  # stopped before its request went out: send nothing
            raise asyncio.CancelledError
        self.tap.reset()  # the record describes the request of this try
        self._call = asyncio.get_running_loop().create_task(self._run(state, input))
        try:
            return await self._call
        finally:
            self._note_requests()

    def _note_requests(self) -> None:
        """Put what the requests carried into the record (idempotent; before each write).

        A resumed attempt keeps what its first run sent: its continuation carries tool results.
        """
        if self.resumed and self.record.request_digest is not None:
            return
        self.parts.update(note_requests(self.record, self.tap))

    async def _settle_cancel(self) -> None:
        self._cancel_call()
        result = self._result
        if isinstance(result, RunResultStreaming) and result.run_loop_task is not None:
            # Let the SDK run loop unwind, so the ledger has rewound before we record.
            await asyncio.wait([result.run_loop_task])
        if self._call is not None and not self._call.done():
            await asyncio.wait([self._call])
        self._note_requests()
        await self._chat._cancelled(self, self._created_id)

    async def _run(self, state: ConversationState, input: Any) -> RunResultBase:
        kwargs = self._chat._strategy.runner_kwargs(self)
        guard, lifecycle = self._chat.guard, state.lifecycle
        if guard is not None and lifecycle is not None:
            # A server strategy's request advances the server's state: it goes out only while
            # the guard (a worker's lease) allows; a refusal withdraws it unsent.
            lifecycle.checkpoint_hook = guard.before_request
        agent = self.agent
        assert agent is not None  # the chat checked it before starting the attempt
        agent, kwargs = recorded(agent, _pinned(kwargs, self.run_overrides), self.tap)
        if not self.stream:
            result: RunResultBase = await state.run(agent, input, **kwargs)
            self._result = result
            self._emit_items(result.new_items)
            return result
        streamed = state.run_streamed(agent, input, **kwargs)
        self._result = streamed
        async for event in streamed.stream_events():
            if event.type == "run_item_stream_event":
                self._emit_items([event.item])
                continue
            if event.type != "raw_response_event":
                continue
            data = event.data
            if isinstance(data, ResponseCreatedEvent):
                self._created_id = data.response.id
            elif isinstance(data, ResponseTextDeltaEvent) and data.delta:
                before = self.status
                self._chat.graph.stream(self.node.id, data.delta)
                if self.status != before:
                    self._emit("status", status=self.status)
                self._deltas.put_nowait(data.delta)
                self._emit("delta", text=data.delta)
        if self._stopping:
            raise asyncio.CancelledError
        return streamed

    def __repr__(self) -> str:
        return f"Attempt(id={self.id!r}, status={self.status!r}, text={self.text[:30]!r})"


def _pinned(kwargs: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A replay's run kwargs: the recorded model and settings win over the run config's."""
    if not overrides or not overrides.get("pinned"):
        return kwargs
    config = kwargs.get("run_config")
    if config is None:
        return kwargs
    model = overrides.get("model")
    pinned = dataclasses.replace(
        config, model=model if model is not None else config.model, model_settings=None
    )
    return {**kwargs, "run_config": pinned}


def _raw(item: Any) -> dict[str, Any]:
    """A run item's raw Responses item as a dict (the SDK keeps a model or a dict)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if callable(dump) else {}
