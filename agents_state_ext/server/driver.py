"""One worker driving conversations: the lease, the stop bus, and the attempts it streams.

Every change to a conversation runs while this worker holds its lease (:mod:`.leases`), so
no other worker drives it meanwhile: a second driver is ``ConversationBusyError`` (HTTP 409)
before anything is sent. An attempt runs in a task of its own, which holds the lease and
watches the stop bus until the attempt is stored in its final status, whatever happens to
the HTTP request that started it: a client that goes away does not stop the answer, only a
stop does (:meth:`Driver.stop`, on any worker).

What a dead worker left in flight is closed as interrupted (:mod:`.recovery`) by the next
worker that takes the conversation's lapsed lease, or that finds no live holder when asked to
stop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .._attempts import AttemptRecord
from .._event_names import WIRE_NAMES
from ..chat import Attempt, AttemptEvent, Conversation
from ..stores import ConversationStore
from .events import HTTPError, ServerEvent, error_body, error_status, keep_alive
from .leases import ConversationBusyError, HeldLease, LeaseManager
from .recovery import IN_FLIGHT, close_interrupted
from .stops import StopBus, StopWatch

__all__ = ["IN_FLIGHT", "Driver", "Run"]

logger = logging.getLogger(__name__)

OpenChat = Callable[[str], Awaitable[Conversation]]
Action = Callable[[Conversation], Attempt]


class Run:
    """An attempt this worker drives: its live events for a stream, its end, its stop."""

    def __init__(self, conversation_id: str, attempt: Attempt) -> None:
        self.conversation_id = conversation_id
        self.attempt = attempt
        self._events = attempt.events()
        self.ended: asyncio.Future[ServerEvent] = asyncio.get_running_loop().create_future()
        """The stream's last event (``record`` or ``error``), once the attempt is stored."""

    def _view(self, status: str) -> dict[str, Any]:
        attempt = self.attempt
        return {
            "attempt_id": attempt.attempt_id,
            "message_id": attempt.id,
            "user_id": attempt.user_id,
            "status": status,
        }

    def _event(self, event: AttemptEvent) -> ServerEvent:
        name = WIRE_NAMES[event.kind]
        if event.kind == "status":
            return ServerEvent(name, self._view(str(event.data["status"])))
        return ServerEvent(name, dict(event.data))

    async def stream(self, *, keep_alive_every: float = 15.0) -> AsyncIterator[bytes]:
        """The SSE bytes of the attempt, from its stored start to its ``record`` / ``error``.

        Leaving early (the client went away) changes nothing for the attempt.
        """
        events = self._events.__aiter__()
        while True:
            try:
                event = await asyncio.wait_for(events.__anext__(), keep_alive_every)
            except asyncio.TimeoutError:
                yield keep_alive()
                continue
            except StopAsyncIteration:
                break
            yield self._event(event).encode()
        yield (await asyncio.shield(self.ended)).encode()


_NOT_STORED = (
    "the answer holds what no store can keep (text that is not valid Unicode, say); "
    "the attempt is stored as failed"
)


class Driver:
    """Drives conversations for one worker: leases, stops, recovery, the attempts in flight.

    Each method takes ``open_chat(conversation_id)``: how the caller opens the conversation
    (with the agent that answers it, if any). ``stop_timeout`` bounds how long a stop waits
    for another worker to stop its attempt; for half of it, a stop asks a worker whose lease
    lapsed before closing its attempt as interrupted.
    """

    def __init__(
        self,
        store: ConversationStore,
        leases: LeaseManager,
        stops: StopBus,
        *,
        stop_timeout: float = 10.0,
        poll: float = 0.1,
    ) -> None:
        self.store = store
        self.leases = leases
        self.stops = stops
        self.stop_timeout = stop_timeout
        self.takeover_grace = stop_timeout / 2
        """How long a stop asks the worker whose lease lapsed before taking the attempt over."""
        self._poll = poll
        self.runs: dict[str, Run] = {}
        """The attempts this worker streams now, by conversation id."""
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def worker_id(self) -> str:
        """This worker's id (the lease holder's name)."""
        return self.leases.worker_id

    # -- holding a conversation ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def session(
        self, conversation_id: str, open_chat: OpenChat
    ) -> AsyncIterator[Conversation]:
        """Hold the conversation's lease and open it, for an action that streams nothing."""
        async with self.leases.hold(conversation_id) as held:
            yield await self._open(conversation_id, held, open_chat)

    async def _open(
        self, conversation_id: str, held: HeldLease, open_chat: OpenChat
    ) -> Conversation:
        """Open the held conversation, its writes fenced by the lease; first close what a dead
        worker left in flight."""
        if held.took_over_from is not None:
            await self._close_interrupted(conversation_id, f"worker {held.took_over_from}", held)
        chat = await open_chat(conversation_id)
        if any(node.status in IN_FLIGHT for node in chat.graph.nodes()):
            # Nobody else may drive it while we hold the lease: it was left by a worker whose
            # lease was released or lost before the attempt's end was stored.
            await self._close_interrupted(conversation_id, "a worker", held)
            chat = await open_chat(conversation_id)
        chat.guard = held
        return chat

    async def _close_interrupted(
        self, conversation_id: str, who: str, held: HeldLease
    ) -> list[str]:
        closed = await close_interrupted(
            self.store,
            conversation_id,
            reason=f"{who} stopped driving the conversation mid-attempt",
            guard=held,
        )
        if closed:
            logger.warning("closed interrupted attempts %s of %s", closed, conversation_id)
        return closed

    # -- attempts ------------------------------------------------------------------------------

    async def start(self, conversation_id: str, open_chat: OpenChat, action: Action) -> Run:
        """Start ``action(chat)`` under the conversation's lease; the run once its start is stored.

        What refuses the attempt before it is sent is raised here: ``ConversationBusyError``,
        the chat's own refusals, an attempt over its budget (``ContextOverflowError``: nothing
        stored).
        """
        ready: asyncio.Future[Run] = asyncio.get_running_loop().create_future()
        self._spawn(self._drive(conversation_id, open_chat, action, ready))
        return await asyncio.shield(ready)

    def _spawn(self, work: Awaitable[Any]) -> None:
        async def run() -> None:
            await work

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(
        self,
        conversation_id: str,
        open_chat: OpenChat,
        action: Action,
        ready: asyncio.Future[Run],
    ) -> None:
        run: Run | None = None
        last: ServerEvent | None = None

        def lost(held: HeldLease) -> None:
            # Another worker may drive the conversation now: stop sending, keep what we have.
            if run is not None:
                self._spawn(run.attempt.stop())

        try:
            async with (
                self.leases.hold(conversation_id, on_lost=lost) as held,
                self.stops.watch(conversation_id) as watch,
            ):
                chat = await self._open(conversation_id, held, open_chat)
                attempt = action(chat)
                run = Run(conversation_id, attempt)
                self.runs[conversation_id] = run
                if not await attempt.started() or attempt.record.status == "failed":
                    await attempt  # refused before anything was sent: raises why
                ready.set_result(run)
                stopping = asyncio.get_running_loop().create_task(
                    self._stop_when_asked(watch, attempt)
                )
                try:
                    with contextlib.suppress(Exception):
                        await attempt
                finally:
                    stopping.cancel()
                    await asyncio.gather(stopping, return_exceptions=True)
                last = await self._last_event(conversation_id, attempt, held)
        except asyncio.CancelledError:
            ready.cancel()
            raise
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.exception("driving conversation %s failed", conversation_id)
                if run is not None:
                    last = _error_event(exc, run.attempt, None)
        finally:
            # The stream ends only now, with the lease released: the client's next action
            # on the conversation is not refused as busy.
            if run is not None:
                if self.runs.get(conversation_id) is run:
                    del self.runs[conversation_id]
                if last is not None:
                    run.ended.set_result(last)
                else:
                    run.ended.cancel()

    async def _stop_when_asked(self, watch: StopWatch, attempt: Attempt) -> None:
        await watch.requested(attempt.attempt_id)
        await attempt.stop()

    async def _last_event(
        self, conversation_id: str, attempt: Attempt, held: HeldLease
    ) -> ServerEvent:
        record = await self.store.get_attempt(conversation_id, attempt.attempt_id)
        error = attempt.error
        if error is not None and record.status in IN_FLIGHT:
            # Its end could not be stored (text no store can hold, say): close it as failed
            # now, on this request, rather than leave it in flight for the next one.
            reason = f"its end could not be stored: {type(error).__name__}"
            try:  # the lease is ours: whatever is in flight here is this attempt
                await close_interrupted(self.store, conversation_id, reason=reason, guard=held)
            except Exception:
                logger.exception("could not close attempt %s as failed", attempt.attempt_id)
            record = await self.store.get_attempt(conversation_id, attempt.attempt_id)
            if error_status(error) == 400:  # the store refused what the model or a tool sent
                logger.warning(
                    "attempt %s: its answer could not be stored: %s", attempt.attempt_id, error
                )
                error = HTTPError(502, "AnswerNotStored", _NOT_STORED)
        if error is None:
            return ServerEvent("record", record.to_dict())
        return _error_event(error, attempt, record)

    # -- stopping ------------------------------------------------------------------------------

    async def stop(self, conversation_id: str, open_chat: OpenChat) -> AttemptRecord:
        """Stop the conversation's attempt, wherever it runs; its stored record.

        Here: stopped at once. In another live worker: asked over the stop bus, then awaited
        (``stop_timeout``, else ``HTTPError`` 504). In no live worker (its worker died): closed
        as interrupted. An attempt awaiting approval is cancelled. Nothing to stop: 409.
        """
        run = self.runs.get(conversation_id)
        if run is not None:
            await run.attempt.stop()
            await asyncio.shield(run.ended)
            return await self.store.get_attempt(conversation_id, run.attempt.attempt_id)
        target = await self._in_flight(conversation_id)
        if target is not None:
            return await self._stop_elsewhere(conversation_id, target)
        async with self.session(conversation_id, open_chat) as chat:
            stopped = await chat.stop()
        if stopped is None:
            raise HTTPError(409, "NothingToStop", "no attempt is running or awaiting approval")
        return await self.store.get_attempt(conversation_id, stopped.attempt_id)

    async def _in_flight(self, conversation_id: str) -> AttemptRecord | None:
        records = await self.store.list_attempts(conversation_id)
        running = [r for r in records if r.status in IN_FLIGHT]
        return running[-1] if running else None

    async def _stop_elsewhere(self, conversation_id: str, target: AttemptRecord) -> AttemptRecord:
        deadline = time.monotonic() + self.stop_timeout
        asked_at = -1.0
        free_since: float | None = None
        while True:
            record = await self.store.get_attempt(conversation_id, target.attempt_id)
            if record.status not in IN_FLIGHT:
                return record
            holder = await self.leases.holder(conversation_id)
            now = time.monotonic()
            if holder is None:
                # A lapsed lease may belong to a worker that is alive but was stalled (a cold
                # start): it would honour the stop and keep the text it streamed, which a
                # takeover would lose. So ask first; take over once nobody answers in time.
                free_since = now if free_since is None else free_since
                if now - free_since >= self.takeover_grace or now >= deadline:
                    recovered = await self._recover(conversation_id, target)
                    if recovered is not None:
                        return recovered
                    free_since = None
                    continue  # its worker renewed the lapsed lease meanwhile: it is alive
            elif now >= deadline:
                raise HTTPError(
                    504,
                    "StopTimeout",
                    f"worker {holder.worker_id} did not stop attempt {target.attempt_id} "
                    f"within {self.stop_timeout:g}s",
                )
            if now - asked_at >= 1.0:  # again each second: a stop sent while it subscribed is lost
                await self.stops.request_stop(conversation_id, target.attempt_id)
                asked_at = now
            await asyncio.sleep(self._poll)

    async def _recover(self, conversation_id: str, target: AttemptRecord) -> AttemptRecord | None:
        """Close an attempt nobody streams any more (its worker died); its record.

        ``None`` when a live worker holds the conversation after all (the streaming worker
        renewed its lapsed lease, or another one took it): the caller asks it to stop.
        """
        try:
            async with self.leases.hold(conversation_id) as held:
                await self._close_interrupted(conversation_id, "the worker streaming it", held)
        except ConversationBusyError:
            return None
        return await self.store.get_attempt(conversation_id, target.attempt_id)

    # -- shutting down -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop every attempt this worker streams (stored as ``cancelled``) and wait for them."""
        for run in list(self.runs.values()):
            with contextlib.suppress(Exception):
                await run.attempt.stop()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _error_event(
    error: BaseException, attempt: Attempt, record: AttemptRecord | None
) -> ServerEvent:
    body = error_body(error)["error"]
    return ServerEvent(
        "error",
        {
            **body,
            "status": error_status(error),
            "attempt_id": attempt.attempt_id,
            "record": record.to_dict() if record is not None else None,
        },
    )
