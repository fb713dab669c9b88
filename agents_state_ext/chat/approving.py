"""The tool-approval half of a chat's API (``Conversation`` inherits it): decide, resume.

An attempt whose run stops for tool approval waits ``awaiting_approval`` (see
:mod:`.parking`); these methods read it, decide on its calls and run it on.
"""

from __future__ import annotations

from typing import Any

from agents import Agent

from .approvals import PendingApproval, read_approvals
from .attempt import Attempt
from .deps import ChatDeps
from .parking import decide_call, fresh, resume_turn, waiting
from .turn import check_idle
from .writes import Writes

__all__ = ["ready", "settle"]


class _Approvals:
    """What a chat does with the attempt that waits for tool approval."""

    _deps: ChatDeps
    _book: Writes
    _in_flight: Attempt | None
    agent: Agent[Any] | None

    async def awaiting_approval(self) -> Attempt | None:
        """The attempt whose tool calls wait for a decision, if any (see :meth:`resume`).

        Read from the store, so a pause or a decision of another handle or process shows.
        """
        await ready(self._deps, self._book, read=True)
        found = await waiting(self._deps, self._book)
        return Attempt.settled(*found, agent=self.agent) if found is not None else None

    async def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls the attempt ``awaiting_approval`` waits on, with decisions so far.

        Read from the store, so decisions taken by another handle or process show. ``[]`` when
        no attempt waits.
        """
        await ready(self._deps, self._book, read=True)
        node = await fresh(self._deps, self._book)
        return read_approvals(node) if node is not None else []

    async def approve(
        self, call_id: str | None = None, *, always: bool = False
    ) -> list[PendingApproval]:
        """Approve a pending tool call (``None``: every undecided one); see :meth:`resume`.

        ``always`` approves later calls of the same tool by the same agent in this run too.
        Decisions are stored at once, so another handle or process may :meth:`resume`. Returns
        the pending calls with their decisions.
        """
        await ready(self._deps, self._book)
        return await decide_call(self._deps, self._book, call_id, "approved", always=always)

    async def reject(
        self, call_id: str | None = None, *, message: str | None = None, always: bool = False
    ) -> list[PendingApproval]:
        """Reject a pending tool call (``None``: every undecided one); see :meth:`resume`.

        The tool does not run; the model is told ``message`` (default: the SDK's rejection
        text) when the attempt resumes. ``always`` rejects later calls of that tool too.
        """
        await ready(self._deps, self._book)
        return await decide_call(
            self._deps, self._book, call_id, "rejected", message=message, always=always
        )

    def resume(self, *, stream: bool = False) -> Attempt:
        """Continue the attempt ``awaiting_approval`` from its stored run, with the decisions.

        Every pending call needs a decision first (``ApprovalPendingError`` names those that
        have none, as this handle last read them: :meth:`pending_approvals` re-reads). The run
        goes on where it stopped: approved tools run, rejected ones tell the model so, and
        nothing the run already sent is sent again. The same attempt (same ids, same record)
        then ends ``complete``, ``cancelled`` or ``failed`` — or waits again. What the store
        says at the attempt's start (another handle stopped it, or the run is not the chat's)
        is raised when the attempt is awaited.
        """
        check_idle(self._deps, self._book, self.agent, "resume", paused_ok=True)
        turn = resume_turn(self._deps, self._book, self.agent, stream=stream)
        self._in_flight = attempt = Attempt(self._deps, self._book, turn)
        return attempt


async def ready(deps: ChatDeps, book: Writes, *, read: bool = False) -> None:
    """File a finished ``chat.session()`` run and wait for this handle's pending writes."""
    settle(deps, read=read)
    await book.sync()


def settle(deps: ChatDeps, *, read: bool = True) -> None:
    """File a finished ``chat.session()`` run (``read``: only a look at the chat)."""
    session = deps.session
    assert session is not None  # every chat handle has its session
    session.settle(read=read)
