"""``GraphSession``: an Agents SDK ``Session`` whose history is a chat's active branch.

``Runner.run(agent, text, session=chat.session())`` reads the active branch's history (system
messages and complete user→assistant turns, within the chat's token budget) and files the run
into the graph as one attempt, with its :class:`~agents_state_ext.AttemptRecord`: the new user
message, then the attempt's output as the SDK stores it. Switching branches changes what the
next run reads. Under ``Conversation.send`` the chat has already created the user message and
the attempt, so the session only hands the SDK the planned history. Only replay and session
chats hand one out (``Conversation.session``): a server-strategy chat's history belongs to the
server.

Run boundaries come from the SDK, not from the shape of the items: every call a run makes on
the session carries that run's context (the SDK's ``RunContextWrapper``, which a session gets by
accepting ``wrapper=``), so a run begins with its first call. It ends when the task that is the
run alone ends (the SDK's streamed run loop, or a task made of ``Runner.run`` /
``ConversationState.run``): cancelled, raised or finished, exactly. A run awaited inside a task
that outlives it (``await Runner.run(...)``) tells a session nothing when it returns or raises;
it is over when the next run through the session begins or the chat is next acted on or read,
and it is filed by what the SDK stored and whether the SDK started a turn after the last one it
stored:

- nothing stored after the user message, or a turn started and never stored: ``failed``;
- the last stored turn left a tool call without output: ``awaiting_approval`` (a run resumed
  from its ``RunState`` with decisions on those calls continues the same attempt);
- otherwise ``complete`` (a final answer, or ``tool_use_behavior="stop_on_first_tool"``).

Filing a run's end may happen where nothing can be awaited (the run's task's done-callback, a
synchronous read such as ``chat.active_path()``): the chat's graph in memory shows the end at
once, and the store write is scheduled as a task that every later action of the chat awaits
first (see :mod:`.writes`). Everything the run stores while it runs is awaited in its own
session calls.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import agents
from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from .._attempts import AttemptRecord
from .._nodes import Node
from .._state import ConversationState
from .._status import UNFINISHED as _UNFINISHED
from ..errors import ApprovalPendingError, InvalidTargetError, InvalidTransitionError
from ..types import AttemptStatus
from .approvals import PendingApproval, open_calls, read_approvals, undecided
from .plan import selected, with_history
from .records import start_record

if TYPE_CHECKING:
    from .deps import ChatDeps
    from .writes import Writes

__all__ = ["GraphSession"]

_SDK_DIR = os.path.dirname(agents.__file__) + os.sep
# A task made of one of these runs one run and nothing else (the SDK's own code is checked by
# file: its streamed run loop, ``Runner.run``).
_RUN_CODES = frozenset({ConversationState.run.__code__})
_NO_ANSWER = "the run ended before the model's answer was stored"
_UNFINISHED_TURN = "the run started a turn after its last stored one and never stored it"


@dataclass
class _Run:
    """One SDK run an app started through the session, as far as the session has seen it."""

    context: Any  # the run's RunContextWrapper; None for items an app adds by hand
    task: asyncio.Task[Any] | None  # the task that is this run alone, if there is one
    owner: asyncio.Task[Any] | None  # the task the run began in
    attempt: str | None = None
    record: AttemptRecord | None = None
    included: dict[str, int] = field(default_factory=dict)
    overflow: bool = False
    turn: Any = None  # the context's turn input when the run's newest batch was stored
    watch: tuple[asyncio.Task[Any], Any] | None = None  # (task, its done callback)


class GraphSession:
    """A ``Session`` over a chat's graph.

    ``session_id`` is the chat's id (on a branch that shares no message with the chat's first
    branch, the chat's id and that branch's first message id: the SDK derives its
    ``prompt_cache_key`` from it). A chat never deletes: ``pop_item`` returns ``None`` and
    ``clear_session`` raises ``InvalidTargetError`` (edit a message or switch branches).
    """

    session_settings: SessionSettings | None = None

    keeps_every_item: ClassVar[bool] = True
    """A chat never deletes: ``ConversationState.compact`` refuses this session up front."""

    def __init__(self, deps: ChatDeps, book: Writes) -> None:
        self._deps = deps
        self._book = book  # its ``bound``: the attempt the chat runs through this session
        self._run: _Run | None = None

    @property
    def session_id(self) -> str:
        """The chat's id, or the chat's and its branch root's (see the class docstring)."""
        bound = self._book.bound
        return self._book.cache_group(bound[0] if bound is not None else None)

    @session_id.setter
    def session_id(self, value: str) -> None:
        raise AttributeError("a chat's session id follows the chat and its branches")

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, wrapper: Any = None
    ) -> list[TResponseInputItem]:
        """The active branch's history, oldest first; the newest ``limit`` items if given."""
        bound = self._book.bound
        if bound is not None:
            items = copy.deepcopy(bound[1])
        elif wrapper is not None:
            run = await self._begin(wrapper)
            items = self._plan(run)
        else:
            items = self._plan(None)
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items  # type: ignore[return-value]  # input-item dicts, as the SDK stores them

    async def add_items(self, items: list[TResponseInputItem], wrapper: Any = None) -> None:
        """File what the SDK stores into the run's attempt (a new user message, then output)."""
        if self._book.bound is not None:
            return  # the chat records its own attempt from the run's result
        await self._store(await self._begin(wrapper), [dict(item) for item in items], wrapper)

    async def pop_item(self, wrapper: Any = None) -> TResponseInputItem | None:
        """Nothing: a chat never deletes a message."""
        return None

    async def clear_session(self, wrapper: Any = None) -> None:
        """Refused: a chat never deletes; edit a message or switch branches instead."""
        raise InvalidTargetError(
            f"chat {self._deps.id} keeps every message; edit or switch instead of clearing"
        )

    # -- runs an app started -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a run an app started through this session is still going, as far as known."""
        run = self._run
        return run is not None and run.task is not None and not run.task.done()

    def settle(self, *, read: bool = False) -> None:
        """File the newest run an app started, unless it is known to be still going.

        ``read``: only a look at the chat; a run awaited in another task that is still alive
        may be going on, so it stays open until that task, an action or the next run ends it.
        The graph shows the end at once; the store write is scheduled (``Writes.later``).
        """
        run = self._run
        if run is None or self.running:
            return
        if run.task is None and read:
            owner = run.owner
            if owner is not None and not owner.done() and owner is not _current_task():
                return
        self._close(run, _outcome(run.task) if run.task is not None else None)

    async def _begin(self, context: Any) -> _Run:
        run = self._run
        if run is not None and run.context is context:
            return run
        if run is not None:
            if self.running:
                raise InvalidTransitionError(
                    f"a run through chat {self._deps.id}'s session is still in flight; one "
                    "run at a time (await or cancel it first)"
                )
            self._close(run, _outcome(run.task) if run.task is not None else None)
        owner = _current_task()
        run = _Run(
            context=context, task=_run_task(owner) if context is not None else None, owner=owner
        )
        paused = self._book.paused_node()
        if paused is not None:
            pending = read_approvals(paused)
            if context is None or not _decided(context, pending):
                waiting = undecided(pending) or [a.call_id for a in pending]
                raise ApprovalPendingError(
                    f"attempt {paused.id} of chat {self._deps.id} awaits approval of tool calls "
                    f"{', '.join(waiting)}: resume its run (Runner.run with its RunState and "
                    "the decisions) or stop it (chat.stop()) first",
                    waiting,
                )
            await self._resume(run, paused)
        self._run = run
        watched = run.task or run.owner
        if watched is not None:
            callback = functools.partial(self._ended, run)
            watched.add_done_callback(callback)
            run.watch = (watched, callback)
        return run

    async def _resume(self, run: _Run, paused: Node) -> None:
        deps, book = self._deps, self._book
        record = await deps.store.get_attempt(deps.id, str(paused.attempt_id))
        decided = [_with_decision(run.context, a) for a in read_approvals(paused)]
        entries = [a.to_dict() for a in decided]
        book.graph.resume(paused.id, meta={"approvals": entries})
        book.paused = None
        run.attempt, run.record, run.turn = paused.id, record, None
        record.approvals = entries
        await book.write(record, "queued")

    def _ended(self, run: _Run, task: asyncio.Task[Any]) -> None:
        if self._run is run:
            self._close(run, _outcome(task) if task is run.task else None)

    def _plan(self, run: _Run | None) -> list[dict[str, Any]]:
        book = self._book
        path = book.graph.active_path()
        if not path:
            return []
        # The history a new user message would get: plan with a placeholder prompt, drop it.
        placeholder = Node(id="__next__", parent_id=path[-1].id, role="user", status="complete")
        plan = with_history(
            selected([*path, placeholder], budget=book.budget, counter=self._deps.counter)
        )
        if run is not None and run.attempt is None:
            run.included = {n.id: plan.tokens[n.id] for n in plan.nodes if n is not placeholder}
            run.overflow = plan.overflow
        return plan.history

    async def _store(self, run: _Run, batch: list[dict[str, Any]], context: Any) -> None:
        deps, book = self._deps, self._book
        graph = book.graph
        outputs = batch
        if run.attempt is None:
            users = [i for i in batch if i.get("role") == "user"]
            outputs = [i for i in batch if i.get("role") != "user"]
            if users:
                user = graph.add_user(users)
                node = graph.start_attempt()
            else:
                # No new user message (an app resuming a run the chat never saw pause):
                # the run answers the active turn's user message again.
                node = graph.retry()
                user = graph.get(str(node.parent_id))
            if not run.included:
                self._plan(run)  # items added by hand: record what the branch held
            run.included[user.id] = deps.counter.count(user.id, user.items)
            run.attempt = node.id
            run.record = start_record(deps, book, node, run.included, overflow=run.overflow)
        if outputs:
            graph.add_items(run.attempt, outputs)
        run.turn = getattr(context, "turn_input", None)
        assert run.record is not None
        await book.write(run.record, "queued")

    def _close(self, run: _Run, outcome: tuple[str, str | None] | None) -> None:
        """File ``run`` as it ended (``outcome``: how, when the session knows).

        The graph changes at once; the store write is scheduled with the record.
        """
        if self._run is run:
            self._run = None
        if run.watch is not None:
            task, callback = run.watch
            task.remove_done_callback(callback)  # a long-lived task must not keep every run
            run.watch = None
        book = self._book
        graph = book.graph
        if run.attempt is None or run.record is None or run.attempt not in graph:
            return  # the run stored nothing: nothing of it reached the chat
        node = graph.get(run.attempt)
        if node.status not in _UNFINISHED:
            return  # already ended (stopped by the chat, or invalidated by an edit)
        if outcome is not None and outcome[0] != "ended":
            status, error = outcome
        else:
            status, error = _by_evidence(node, run)
            owner = _outcome(run.owner) if outcome is None else None
            if status == "failed" and owner is not None and owner[0] != "ended":
                status, error = owner  # unfinished, in a task that was cancelled or raised
        record = run.record
        if status == "awaiting_approval":
            pending = open_calls(node.items)
            record.approvals = [a.to_dict() for a in pending]
            if node.status != "awaiting_approval":
                graph.pause(node.id, meta={"approvals": record.approvals})
            book.later(record, "awaiting_approval")
            book.paused = node.id
            return
        if node.status == "awaiting_approval":
            graph.resume(node.id)
        if status == "complete":
            graph.complete(node.id)
        elif status == "cancelled":
            graph.stop(node.id)
        else:
            graph.fail(node.id, error or "failed")
        # "ended" was resolved by the evidence above: what is left is an attempt status.
        book.later(record, cast(AttemptStatus, status), error=error)


def _by_evidence(node: Node, run: _Run) -> tuple[AttemptStatus, str | None]:
    """How a run ended that raised nothing the session saw, from what it stored."""
    if not node.items:
        return "failed", _NO_ANSWER
    if run.context is not None and getattr(run.context, "turn_input", None) is not run.turn:
        return "failed", _UNFINISHED_TURN
    if open_calls(node.items):
        return "awaiting_approval", None
    return "complete", None


def _outcome(
    task: asyncio.Task[Any] | None,
) -> tuple[AttemptStatus | Literal["ended"], str | None] | None:
    """How the task that was a run ended: cancelled, failed (why), or ended."""
    if task is None or not task.done():
        return None
    if task.cancelled():
        return "cancelled", None
    error = task.exception()
    if error is not None:
        return "failed", f"{type(error).__name__}: {error}"
    return "ended", None


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _run_task(task: asyncio.Task[Any] | None) -> asyncio.Task[Any] | None:
    """``task``, when it is one run alone (its end is the run's end); else ``None``."""
    code = getattr(task.get_coro(), "cr_code", None) if task is not None else None
    if code is None:
        return None
    if code in _RUN_CODES or code.co_filename.startswith(_SDK_DIR):
        return task
    return None


def _with_decision(context: Any, approval: PendingApproval) -> PendingApproval:
    """``approval`` with the decision the run's context carries on it, if any."""
    verdict = context.is_tool_approved(approval.tool_name, approval.call_id)
    if verdict is None:
        return approval
    return dataclasses.replace(approval, decision="approved" if verdict else "rejected")


def _decided(context: Any, pending: list[PendingApproval]) -> bool:
    """Whether the run's context carries a decision on any of the ``pending`` calls."""
    check = getattr(context, "is_tool_approved", None)
    if not callable(check):
        return False
    return any(check(a.tool_name, a.call_id) is not None for a in pending)
