"""The attempt of a chat that waits for tool approval: park it, decide, resume, or drop it.

A run that stops on tool calls made with ``needs_approval=True`` leaves its attempt
``awaiting_approval``: the run (a ``ConversationState.dumps`` envelope) is put in the store
beside the attempt, the calls in the node's ``meta["approvals"]`` and in its record. Any
handle reads and decides them; the handle that resumes loads the run, applies the decisions
and runs it on as the same attempt. At most one attempt of a chat waits at a time, and the
chat starts no other attempt meanwhile.

Which attempt waits is known in memory (so ``send`` refuses at once); what the store says —
decisions another handle took, its stored run — is read by the coroutines here, and by a
resumed attempt's task when it starts (:meth:`Parking.begin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.result import RunResultBase

from .._attempts import AttemptRecord
from .._nodes import Node
from .._state import ConversationState
from .._status import IN_FLIGHT as _IN_FLIGHT
from ..errors import ApprovalPendingError, InvalidTransitionError
from .approvals import (
    Decision,
    PendingApproval,
    apply_decisions,
    approvals_from_interruptions,
    decide,
    read_approvals,
    undecided,
)
from .attempt import Attempt
from .plan import Plan
from .records import response_id

if TYPE_CHECKING:
    from .conversation import Conversation

__all__ = ["Parking", "interruptions", "output_items"]

_ELSEWHERE = (
    "was paused by a run an app started with Runner through chat.session(); its RunState is "
    "the app's: decide on it and resume that run with Runner, or stop it with chat.stop()"
)


def interruptions(result: RunResultBase) -> list[Any]:
    """The tool calls a run stopped on for approval (``RunResult`` and streamed alike)."""
    return list(getattr(result, "interruptions", None) or [])


def output_items(result: RunResultBase) -> list[dict[str, Any]]:
    """The run's items as input items; an approval request is the SDK's marker, not an item."""
    return [
        dict(item.to_input_item()) for item in result.new_items if item.type != "tool_approval_item"
    ]


class Parking:
    """Which attempt of ``chat`` waits for approval, and every move it can make."""

    def __init__(self, chat: Conversation) -> None:
        self._chat = chat
        self.node_id: str | None = None
        self.found()

    def found(self) -> None:
        """Look for the waiting attempt in the chat's graph (after a load)."""
        graph = self._chat.graph
        self.node_id = next((n.id for n in graph.nodes() if n.status == "awaiting_approval"), None)

    def node(self) -> Node | None:
        """The attempt ``awaiting_approval``, as this handle last read it."""
        chat = self._chat
        if self.node_id is None or self.node_id not in chat.graph:
            return None
        node = chat.graph.get(self.node_id)
        return node if node.status == "awaiting_approval" else None

    async def fresh(self) -> Node | None:
        """The attempt ``awaiting_approval`` as the store holds it now."""
        if self._chat.in_flight is None:
            await self._reload_if_stale()
        return self.node()

    async def _reload_if_stale(self) -> None:
        chat = self._chat
        if await chat.store.get_head(chat.id) != chat._writes.head:
            await chat._writes.reload()
        elif self.node_id is not None and self.node_id in chat.graph:
            stored = await chat.store.get_node(chat.id, self.node_id)
            if stored.to_dict() != chat.graph.get(self.node_id).to_dict():
                await chat._writes.reload()  # another handle decided on its calls

    def refuse(self, action: str) -> None:
        """``ApprovalPendingError`` when an attempt waits: the chat takes no other meanwhile."""
        node = self.node()
        if node is None:
            return
        pending = read_approvals(node)
        waiting = undecided(pending) or [a.call_id for a in pending]
        raise ApprovalPendingError(
            f"cannot {action}: attempt {node.id} awaits approval of tool calls "
            f"{', '.join(waiting)}; approve or reject them and resume(), or stop() it",
            waiting,
        )

    async def attempt(self) -> Attempt | None:
        """A view of the waiting attempt, as the store holds it."""
        node = await self.fresh()
        if node is None or node.attempt_id is None:
            return None
        chat = self._chat
        return Attempt.settled(chat, node, await chat.store.get_attempt(chat.id, node.attempt_id))

    # -- a run stops; decisions; the run goes on ---------------------------------------------

    async def park(self, attempt: Attempt, result: RunResultBase, state: ConversationState) -> None:
        """Park ``attempt``: its run waits in the store for decisions on its tool calls."""
        chat = self._chat
        pending = [a.to_dict() for a in approvals_from_interruptions(interruptions(result))]
        tracker = state.tracker
        ended_on = response_id(result, state)
        # The run first, so a crash right after it leaves a pause that can be resumed.
        await chat.store.put_run_state(chat.id, attempt.attempt_id, state.dumps(result))
        if attempt.node.status in _IN_FLIGHT:
            meta = {"approvals": pending, "response_id": ended_on}
            chat.graph.pause(attempt.id, items=output_items(result), meta=meta)
        record = attempt.record
        record.approvals, record.response_id = pending, ended_on
        if tracker is not None:
            record.cursor_after = tracker.previous_response_id or tracker.conversation_id
        await chat._writes.end(attempt, chat._writes.ended(attempt, "awaiting_approval"))
        if attempt.node.status == "awaiting_approval":
            self.node_id = attempt.id
        else:  # another handle's edit invalidated it meanwhile: it can never resume
            await chat.store.delete_run_state(chat.id, attempt.attempt_id)

    async def decide(
        self,
        call_id: str | None,
        decision: Decision,
        *,
        message: str | None = None,
        always: bool = False,
    ) -> list[PendingApproval]:
        """Store ``decision`` on a waiting call (``None``: on every undecided one)."""
        chat = self._chat
        node = await self._waiting()
        approvals = decide(read_approvals(node), call_id, decision, message=message, always=always)
        record = await chat.store.get_attempt(chat.id, str(node.attempt_id))
        entries = [a.to_dict() for a in approvals]
        chat.graph.annotate(node.id, {"approvals": entries})
        record.approvals = entries
        await chat._writes.commit([record])
        return approvals

    def resume(self, *, stream: bool) -> Attempt:
        """Start running the waiting attempt on, once every call is decided (as last read).

        The attempt's task re-reads the store, then stores its start (:meth:`begin`).
        """
        chat = self._chat
        node = self.node()
        if node is None:
            raise InvalidTransitionError(f"nothing in chat {chat.id} awaits approval")
        _check_decided(read_approvals(node))
        assert chat.agent is not None  # _check_idle() saw it
        record = AttemptRecord(message_id=node.id, attempt_id=str(node.attempt_id))
        plan = Plan(nodes=[], input=[], tokens={}, used=0, budget=chat.budget, overflow=False)
        return Attempt(chat, node, plan, record, agent=chat.agent, stream=stream, resume=True)

    async def begin(self, attempt: Attempt) -> None:
        """The start of a resumed attempt: check the store still lets it run, and store it."""
        chat = self._chat
        await self._reload_if_stale()
        node = self.node()
        if node is None or node.id != attempt.id:
            raise InvalidTransitionError(
                f"attempt {attempt.id} no longer awaits approval (another handle resumed or "
                "stopped it)"
            )
        approvals = read_approvals(node)
        _check_decided(approvals)
        record = await chat.store.get_attempt(chat.id, str(node.attempt_id))
        blob = await chat.store.get_run_state(chat.id, record.attempt_id)
        if blob is None:
            raise InvalidTransitionError(f"attempt {node.id} {_ELSEWHERE}")
        attempt.plan = chat._strategy.plan(str(node.parent_id))
        entries = [a.to_dict() for a in approvals]
        attempt.node = chat.graph.resume(node.id, meta={"approvals": entries})
        self.node_id = None
        record.approvals = entries
        attempt.record, attempt.paused_run = record, blob
        await chat._writes.write(record, "queued")
        attempt.stored = True

    async def load(self, attempt: Attempt, blob: str) -> tuple[ConversationState, Any]:
        """The state and the ``RunState`` of a resumed attempt, with the decisions applied."""
        state, run_state = await self._chat._strategy.resumed(attempt, blob)
        apply_decisions(run_state, read_approvals(attempt.node))
        return state, run_state

    async def drop(self) -> Attempt | None:
        """Cancel the waiting attempt, if any: its run is dropped, its tools never run."""
        chat = self._chat
        node = await self.fresh()
        if node is None:
            return None
        record = await chat.store.get_attempt(chat.id, str(node.attempt_id))
        chat._strategy.interrupted(node)
        await chat._strategy.save()
        node = chat.graph.stop(node.id)
        self.node_id = None
        record.cursor_after = record.cursor_before
        await chat._writes.write(record, "cancelled")
        await chat.store.delete_run_state(chat.id, record.attempt_id)
        return Attempt.settled(chat, chat.graph.get(node.id), record)

    async def _waiting(self) -> Node:
        """The waiting attempt, which the chat itself ran (so its run is in the store)."""
        chat = self._chat
        node = await self.fresh()
        if node is None:
            raise InvalidTransitionError(f"nothing in chat {chat.id} awaits approval")
        if await chat.store.get_run_state(chat.id, str(node.attempt_id)) is None:
            raise InvalidTransitionError(f"attempt {node.id} {_ELSEWHERE}")
        return node


def _check_decided(approvals: list[PendingApproval]) -> None:
    waiting = undecided(approvals)
    if waiting:
        raise ApprovalPendingError(
            f"cannot resume: tool calls {', '.join(waiting)} wait for a decision "
            "(approve or reject them)",
            waiting,
        )
