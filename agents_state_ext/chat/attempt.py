"""``Attempt``: one assistant attempt of a chat, running as a task, streamed or not, stoppable.

The attempt keeps its task, its events and :meth:`~Attempt.stop`; what its task does is the
turn pipeline (:mod:`.turn`), over the attempt's :class:`~.deps.Turn`, which its properties
show.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Generator
from typing import Any

from agents import Agent

from .._attempts import AttemptRecord
from .._model import RequestTap
from .._nodes import Node, NodeStatus
from .approvals import PendingApproval, read_approvals
from .deps import ChatDeps, Outcome, Turn
from .events import AttemptEvent, Events
from .plan import Plan
from .request import cancel_call, trace_for
from .turn import run_turn
from .writes import Writes

__all__ = ["Attempt"]


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
        self, deps: ChatDeps | None, book: Writes | None, turn: Turn, *, run: bool = True
    ) -> None:
        self._deps, self._book, self._turn = deps, book, turn
        self._events = Events(live=run)
        self._outcome: Outcome | None = None
        self._task: asyncio.Task[None] | None = None  # None: it does not run in this handle
        if run:
            assert deps is not None and book is not None
            self._task = asyncio.get_running_loop().create_task(self._drive())
            book.running = turn
        else:
            turn.stored = True
            turn.started.set()

    @classmethod
    def settled(cls, node: Node, record: AttemptRecord, agent: Agent[Any] | None) -> Attempt:
        """A view of an attempt that does not run in this handle (parked, or ended)."""
        plan = Plan(nodes=[], input=[], tokens={}, used=0, budget=None, overflow=False)
        return cls(None, None, Turn(node, plan, record, agent=agent, stream=False), run=False)

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

    # -- the turn it runs ---------------------------------------------------------------------

    @property
    def node(self) -> Node:
        """The attempt's assistant message in the chat's graph."""
        return self._turn.node

    @property
    def plan(self) -> Plan:
        """What its request sends (see ``Plan``)."""
        return self._turn.plan

    @property
    def record(self) -> AttemptRecord:
        """Its :class:`AttemptRecord`, as this handle holds it."""
        return self._turn.record

    @property
    def agent(self) -> Agent[Any] | None:
        """The agent that answers."""
        return self._turn.agent

    @property
    def stream(self) -> bool:
        """Whether the answer is streamed."""
        return self._turn.stream

    @property
    def error(self) -> BaseException | None:
        """What went wrong (raised when awaited), or ``None``."""
        return self._turn.error

    @property
    def resumed(self) -> bool:
        """Whether this attempt continues a run that waited for tool approval."""
        return self._turn.resumed

    @property
    def stored(self) -> bool:
        """Whether its start is in the store (``False``: refused before, nothing was stored)."""
        return self._turn.stored

    @property
    def end_refused(self) -> bool:
        """Whether the store refused its end when it ended (``error`` says why): its final
        status was in memory only, so no final ``status`` event claimed it."""
        return self._turn.end_refused

    @property
    def tap(self) -> RequestTap:
        """What this attempt's requests were, as they went out (see ``AttemptRecord``)."""
        return self._turn.tap

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
            delta = await self._events.deltas.get()
            if delta is None:
                return
            yield delta

    def events(self) -> AsyncIterator[AttemptEvent]:
        """The attempt's :class:`AttemptEvent` from now on: status, text, tool calls and results.

        Each call is a new listener, independent of ``async for delta in attempt`` and of other
        listeners; it sees what happens after the call (call it right after starting the
        attempt to see everything) and ends when the attempt has ended and been stored.
        """
        return self._events.listen()

    async def started(self) -> bool:
        """Wait until the attempt's start is stored, or refused; whether it was stored.

        ``False``: nothing of it was stored (awaiting it raises why). An attempt over its
        budget is stored, as ``failed``, and sends nothing.
        """
        await self._turn.started.wait()
        return self.stored

    async def stop(self) -> Attempt:
        """Cancel the attempt and wait until its partial answer is stored as ``cancelled``.

        Stopped before its request went out, the attempt sends nothing (its start is still
        stored, then its end as ``cancelled``).
        """
        if self._task is not None and not self._task.done():
            self._turn.stopping = True
            cancel_call(self._turn)
            await asyncio.wait([self._task])
        return self

    # -- running -----------------------------------------------------------------------------

    async def _drive(self) -> None:
        deps, book, turn = self._deps, self._book, self._turn
        assert deps is not None and book is not None
        # A resumed attempt learns its trace from its stored record (see request.answer).
        made = None if turn.resumed else trace_for(deps, turn)
        with made if made is not None else contextlib.nullcontext():
            try:
                self._outcome = await run_turn(deps, book, turn, self._events)
            finally:  # whatever the store did, iterating the attempt ends
                self._finish()

    def _finish(self) -> None:
        turn = self._turn
        status = turn.node.status
        shown = not turn.stream and status in ("complete", "awaiting_approval")
        self._events.finish(
            text=turn.node.text() if shown else None,
            status=status if turn.stored and not turn.end_refused else None,
        )

    def __repr__(self) -> str:
        return f"Attempt(id={self.id!r}, status={self.status!r}, text={self.text[:30]!r})"
