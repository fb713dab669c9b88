"""The attempt of a chat that waits for tool approval: park it, decide, resume, or drop it.

A run that stops on tool calls made with ``needs_approval=True`` leaves its attempt
``awaiting_approval``: the run (a ``ConversationState.dumps`` envelope) is put in the store
beside the attempt, the calls in the node's ``meta["approvals"]`` and in its record. Any
handle reads and decides them; the handle that resumes loads the run, applies the decisions
and runs it on as the same attempt. At most one attempt of a chat waits at a time, and the
chat starts no other attempt meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.result import RunResultBase

from .. import _compat
from ..errors import ApprovalPendingError, InvalidTransitionError
from ..nodes import Node
from ..state import ConversationState
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
from .plan import plan_request

if TYPE_CHECKING:
    from .conversation import Conversation

__all__ = ["Parking", "interruptions", "output_items"]

_IN_FLIGHT = ("queued", "streaming")
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

    def node(self, *, fresh: bool = False) -> Node | None:
        """The attempt ``awaiting_approval``; ``fresh``: as the store holds it now."""
        chat = self._chat
        if fresh:
            self._reload_if_stale()
        if self.node_id is None or self.node_id not in chat.graph:
            return None
        node = chat.graph.get(self.node_id)
        return node if node.status == "awaiting_approval" else None

    def _reload_if_stale(self) -> None:
        chat = self._chat
        if chat.in_flight is not None:
            return
        if chat.store.get_head(chat.id) != chat._head:
            chat._reload()
        elif self.node_id is not None and self.node_id in chat.graph:
            stored = chat.store.get_node(chat.id, self.node_id)
            if stored.to_dict() != chat.graph.get(self.node_id).to_dict():
                chat._reload()  # another handle decided on its calls

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

    def attempt(self) -> Attempt | None:
        """A view of the waiting attempt."""
        node = self.node()
        if node is None or node.attempt_id is None:
            return None
        chat = self._chat
        return Attempt.settled(chat, node, chat.store.get_attempt(chat.id, node.attempt_id))

    # -- a run stops; decisions; the run goes on ---------------------------------------------

    def park(self, attempt: Attempt, result: RunResultBase, state: ConversationState) -> None:
        """Park ``attempt``: its run waits in the store for decisions on its tool calls."""
        chat = self._chat
        pending = [a.to_dict() for a in approvals_from_interruptions(interruptions(result))]
        tracker = state.tracker
        response_id = result.last_response_id
        if tracker is not None and tracker.previous_response_id is not None:
            response_id = tracker.previous_response_id
        # The run first, so a crash right after it leaves a pause that can be resumed.
        chat.store.put_run_state(chat.id, attempt.attempt_id, state.dumps(result))
        if attempt.node.status in _IN_FLIGHT:
            meta = {"approvals": pending, "response_id": response_id}
            chat.graph.pause(attempt.id, items=output_items(result), meta=meta)
        record = attempt.record
        record.approvals, record.response_id = pending, response_id
        if tracker is not None:
            record.cursor_after = tracker.previous_response_id or tracker.conversation_id
        chat._finish(attempt, "awaiting_approval")
        if attempt.node.status == "awaiting_approval":
            self.node_id = attempt.id
        else:  # another handle's edit invalidated it meanwhile: it can never resume
            chat.store.delete_run_state(chat.id, attempt.attempt_id)

    def decide(
        self,
        call_id: str | None,
        decision: Decision,
        *,
        message: str | None = None,
        always: bool = False,
    ) -> list[PendingApproval]:
        """Store ``decision`` on a waiting call (``None``: on every undecided one)."""
        chat = self._chat
        node = self._waiting()
        approvals = decide(read_approvals(node), call_id, decision, message=message, always=always)
        entries = [a.to_dict() for a in approvals]
        chat.graph.annotate(node.id, {"approvals": entries})
        chat._commit()
        record = chat.store.get_attempt(chat.id, str(node.attempt_id))
        record.approvals = entries
        chat.store.put_attempt(chat.id, record)
        return approvals

    def resume(self, *, stream: bool) -> Attempt:
        """Run the waiting attempt on from its stored run, once every call is decided."""
        chat = self._chat
        node = self._waiting()
        approvals = read_approvals(node)
        waiting = undecided(approvals)
        if waiting:
            raise ApprovalPendingError(
                f"cannot resume: tool calls {', '.join(waiting)} wait for a decision "
                "(approve or reject them)",
                waiting,
            )
        record = chat.store.get_attempt(chat.id, str(node.attempt_id))
        blob = chat.store.get_run_state(chat.id, record.attempt_id)
        assert blob is not None and chat.agent is not None  # _waiting() and _check_idle() saw
        path = chat.graph.path_to(str(node.parent_id))
        plan = plan_request(chat.strategy, path, budget=chat.budget, counter=chat.counter)
        entries = [a.to_dict() for a in approvals]
        chat.graph.resume(node.id, meta={"approvals": entries})
        self.node_id = None
        record.approvals = entries
        chat._write(record, "queued")
        return Attempt(chat, node, plan, record, agent=chat.agent, stream=stream, resume_from=blob)

    async def load(self, attempt: Attempt, blob: str) -> tuple[ConversationState, Any]:
        """The state and the ``RunState`` of a resumed attempt, with the decisions applied."""
        chat = self._chat
        session = None
        if chat.strategy == "session":
            chat._session._bind(attempt.id, attempt.plan.history)
            session = chat._session
        client = None
        if chat.strategy == "conversation":
            model = getattr(attempt.agent, "model", None)
            client = chat.client or _compat.inner_openai_client(model)
        agent = attempt.agent
        assert agent is not None  # resume() checked it
        state, run_state = await ConversationState.loads(
            agent, blob, session=session, client=client
        )
        apply_decisions(run_state, read_approvals(attempt.node))
        return state, run_state

    def drop(self) -> Attempt | None:
        """Cancel the waiting attempt, if any: its run is dropped, its tools never run."""
        chat = self._chat
        node = self.node(fresh=True)
        if node is None:
            return None
        record = chat.store.get_attempt(chat.id, str(node.attempt_id))
        chat.graph.stop(node.id)
        self.node_id = None
        chat.store.delete_run_state(chat.id, record.attempt_id)
        chat._interrupted_on_server(node)
        record.cursor_after = record.cursor_before
        chat._write(record, "cancelled")
        return Attempt.settled(chat, chat.graph.get(node.id), record)

    def _waiting(self) -> Node:
        """The waiting attempt, which the chat itself ran (so its run is in the store)."""
        chat = self._chat
        node = self.node(fresh=True)
        if node is None:
            raise InvalidTransitionError(f"nothing in chat {chat.id} awaits approval")
        if chat.store.get_run_state(chat.id, str(node.attempt_id)) is None:
            raise InvalidTransitionError(f"attempt {node.id} {_ELSEWHERE}")
        return node
