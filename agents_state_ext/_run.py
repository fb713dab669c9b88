"""A conversation's run lifecycle: the one place a run begins, sends each request, and ends.

Every run of a server-strategy conversation goes through one :class:`RunLifecycle`: it owns the
claim (one run at a time; an ``agent.as_tool()`` sub-run passes through), the batch a
``call_model_input_filter`` decided and what each returned item replaced, the partial output of
a stream, the request log, and the end-of-run check that no tool output the run produced and no
input it was given is lost. The state, the input-filter adapter, persistence and the wrapping
model use it through these public methods only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from agents import RunState
from openai import AsyncOpenAI

from . import _compat
from ._filter_match import match_filtered
from ._items import item_to_dict
from ._reconcile import reconcile_conversation
from ._repairs import ToolCallRepair
from ._request import REQUEST_HISTORY, PartialOutput, RequestCall, RunProgress, SentRequest
from ._run_state_json import (
    newest_response_id,
    processed_ids,
    run_state_data,
    tool_outputs,
    uncommitted_calls,
)
from ._tracing import repair_span
from ._tracker import ServerConversationTracker
from .errors import (
    MixedStateOwnerError,
    RunInProgressError,
)

__all__ = ["RunLifecycle"]


class RunLifecycle:
    """The runs of one server-strategy conversation: begin, every request, end.

    ``ConversationState`` makes one per conversation; ``reconcile_client`` (an ``AsyncOpenAI``)
    reads a conversation's items when a request's fate is unknown.
    """

    def __init__(
        self, tracker: ServerConversationTracker, reconcile_client: AsyncOpenAI | None = None
    ) -> None:
        self.tracker = tracker
        """The conversation's ledger."""
        self.reconcile_client = reconcile_client
        self.partial: PartialOutput | None = None
        """The newest streamed attempt's response id and text."""
        self.requests: deque[SentRequest] = deque(maxlen=REQUEST_HISTORY)
        """The newest requests, exactly as sent."""
        self.checkpoint_hook: Callable[[], Awaitable[None]] | None = None
        """Awaited after each request is marked sent and before it goes out, and after it is
        acknowledged (``HeldState`` saves the ledger there). If it raises, the request is not
        sent and is rewound; the error ends the run."""
        self._owner: object | None = None
        self._owner_run: object | None = None
        self._run: RunProgress | None = None
        self._graph: set[int] | None = None
        self._filter_batch: list[Any] | None = None
        self._replaced: list[Any] = []
        self._call: RequestCall | None = None
        self._resumed: tuple[RunState[Any], set[str], frozenset[str]] | None = None
        self._reported: ToolCallRepair | None = None  # the newest repair already traced
        self._mark_repairs_reported()

    async def checkpoint(self) -> None:
        """Run :attr:`checkpoint_hook`, if any."""
        if self.checkpoint_hook is not None:
            await self.checkpoint_hook()

    # -- a run begins and ends ---------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether a run started by ``ConversationState`` is in flight."""
        return self._run is not None

    def ensure_idle(self) -> None:
        """Raise :class:`~agents_state_ext.RunInProgressError` while a run is in flight."""
        if self._run is not None:
            raise RunInProgressError(
                "this ConversationState already has a run in flight; two runs at once would "
                "both advance one server cursor. Await or cancel the first run, or give each "
                "concurrent conversation its own ConversationState"
            )

    def begin(self, input: Any, graph: Iterable[int] = ()) -> None:
        """Start a run on ``input`` (its agents are the ids in ``graph``); one at a time."""
        self.ensure_idle()
        known, self._resumed = self._resumed, None
        if isinstance(input, RunState):
            if known is not None and known[0] is input:
                ids, uncommitted = known[1], known[2]
            else:
                data = run_state_data(input)
                ids, uncommitted = processed_ids(data), frozenset(uncommitted_calls(data))
            staged = _staged_input(input)
            # The RunState sends its staged input itself: the ledger's copy of a failed
            # request's input is not sent beside it. Like a new turn's input, it is held if no
            # request of the run carries it, so a new turn in its place still sends it.
            self._run = RunProgress(input=staged, resumed=ids, uncommitted=uncommitted)
            self.tracker.expect_copies(staged)
        else:
            self._run = RunProgress(input=_input_items(input))
            # A new turn goes on after the newest response the server holds: no run of this
            # state will ask for it again (a resume of this run must not be handed it).
            self.tracker.clear_undelivered()
        self._graph = set(graph) or None
        self._owner = None
        self._filter_batch = None
        self._replaced = []

    def end(self, result: Any = None, error: BaseException | None = None) -> None:
        """End the run: keep what it produced but never sent, and input it never sent.

        ``result`` (a run result) or ``error`` (what the run raised) tells which tool outputs
        the run produced; each one answering a call the server holds open is kept and sent with
        the next request. Input that no request of the run carried (a stream cancelled before
        its first event) is pending, so the next request sends it exactly once.
        """
        run, self._run = self._run, None
        call, self._call = self._call, None
        if call is not None:
            # The run is over, so is its request: a stream the SDK has not closed yet (a
            # cancelled task) must not settle later, against another run's request.
            call.fail(error)
        self._owner = None
        self._filter_batch = None
        self._replaced = []
        if self.tracker.open_calls:
            # Only an output for a call the server holds open is kept (see harvest).
            self.harvest(result if result is not None else getattr(error, "run_data", None))
        if run is not None and not run.sent:
            self.tracker.hold(run.input)
        self.tracker.end_run()
        # A guardrail's undo may have put back an earlier ledger, whose repairs are old news.
        self._mark_repairs_reported()

    def snapshot(self) -> dict[str, Any]:
        """The ledger as :meth:`ServerConversationTracker.to_dict`, for a checkpoint now.

        Taken during a run that has sent nothing yet, the run's input is saved as pending: a
        restore must send it, since this run's own request may never go out.
        """
        run = self._run
        if run is None or run.sent or not run.input:
            return self.tracker.to_dict()
        copy = ServerConversationTracker.from_dict(self.tracker.to_dict())
        copy.hold(run.input)
        return copy.to_dict()

    def drop_input(self) -> None:
        """The run's input was rejected (an input guardrail): it is never to be sent."""
        if self._run is not None:
            self._run.input = []

    def rewind(self, ledger: Mapping[str, Any] | None) -> None:
        """Undo a run whose input was rejected: drop the input, put back ``ledger`` (if any).

        ``ledger`` is :meth:`ServerConversationTracker.to_dict` from before the run began. It
        works during the run and after its end (a stream's tripwire reaches the app last).
        """
        self.drop_input()
        if ledger is not None:
            self.tracker = ServerConversationTracker.from_dict(ledger)
        if self._run is None:
            self._mark_repairs_reported()

    def tool_finished(self, output: Any) -> None:
        """A tool of the run returned ``output`` (an output item): keep it until it is sent."""
        self.tracker.record_output(output)

    def harvest(self, source: Any) -> None:
        """Keep the tool outputs of ``source`` (a run result, RunState, its JSON, error details)."""
        for item in tool_outputs(source):
            self.tracker.record_output(item)

    # -- the SDK's view of a run -------------------------------------------------------------

    def claims(self, owner: object | None, run: object | None = None) -> bool:
        """Bind to the first SDK run that calls; its ``as_tool`` sub-runs pass through.

        ``run`` names the run configuration the calling model was made for: a sub-run shares
        its parent's, so a call from another SDK run under another configuration is a second
        run on this conversation, refused with :class:`~agents_state_ext.RunInProgressError`
        before anything is sent.
        """
        if self._owner is None:
            self._owner = owner
            self._owner_run = run
            return True
        if self._owner is owner:
            if self._owner_run is None:
                self._owner_run = run
            return True
        if run is None or self._owner_run is None or run is self._owner_run:
            return False
        raise RunInProgressError(
            "another run of this ConversationState is in flight; two runs at once would both "
            "advance one server cursor. Await or cancel the first run, or give each concurrent "
            "conversation its own ConversationState"
        )

    def owns(self, owner: object | None) -> bool:
        """Whether ``owner`` is the SDK run this conversation is bound to right now."""
        return self._owner is not None and self._owner is owner

    @property
    def claimed(self) -> bool:
        """Whether an SDK run has made its first model call through this conversation."""
        return self._owner is not None

    def release(self, owner: object | None) -> None:
        """The SDK run ``owner`` ended (its models' cleanup hook)."""
        if owner is self._owner:
            self._owner = None
            self._owner_run = None
            self._filter_batch = None
            self._replaced = []
            if self._run is None:
                # A run the app started with Runner and run_config(): no begin() to end it.
                self.tracker.end_run()

    def owns_agent(self, agent: object, model_is_ours: bool) -> bool:
        """Whether ``agent`` belongs to the bound run's graph (not an ``as_tool`` sub-run's)."""
        return model_is_ours or self._graph is None or id(agent) in self._graph

    # -- every request -----------------------------------------------------------------------

    async def settle(self, model: object | None) -> None:
        """Reconcile an uncertain batch against the server before anything else is sent."""
        if not self.tracker.uncertain:
            return
        client = self.reconcile_client or _compat.inner_openai_client(model)
        if client is None:
            raise RuntimeError(
                "conversation reconciliation needs an AsyncOpenAI client: pass client= to "
                "ConversationState.conversation(...)"
            )
        await reconcile_conversation(self.tracker, client)

    def replay(self) -> dict[str, Any] | None:
        """The response to hand this model call instead of sending a request, if any.

        Conversation strategy: the server holds a response that the run asking now never
        processed (its stream was cancelled right after ``response.completed``, or it was
        accepted but the client never heard). Asking the model again would put a second answer
        in the conversation, so a resume of that run, or the same run retrying, gets the stored
        one. A new turn goes on after it instead.
        """
        tracker, run = self.tracker, self._run
        undelivered = tracker.undelivered
        tracker.clear_undelivered()
        if run is None:
            return None
        # Only the first call of a resumed run, or the call after one of this run's requests
        # went unheard, can be asking again for a response the server already holds.
        first, unheard = run.calls == 0, run.unheard
        run.calls += 1
        run.unheard = False
        if undelivered is None:
            return None
        output = [item_to_dict(o) for o in undelivered["output"]]
        ids = {i for i in (item.get("id") for item in output) if i}
        resumed_without = run.resumed is not None and first and ids and not ids & run.resumed
        if resumed_without and any(item.get("call_id") in run.uncommitted for item in output):
            # The run was cancelled inside a tool of that response: the SDK refuses to run the
            # call again, so the response is not handed back; the server holds the call open
            # and the next request closes it as interrupted (a repair), then the run goes on.
            return None
        if unheard or resumed_without:
            run.sent = True
            return undelivered
        return None

    def filtered(self, offered: list[Any], returned: list[Any]) -> None:
        """A ``call_model_input_filter`` turned ``offered`` into ``returned``.

        ``returned`` is sent exactly as it is. An offered item it does not carry was either
        replaced by a rewritten copy (a returned item the filter made, of the same kind: the
        same type and role, or the same call id) or left out. A replaced item counts as sent
        once the request succeeds, so the SDK offering the same object again later in the run
        sends nothing twice; a left-out item stays pending and goes with a later request, as
        under the SDK's own tracker.
        """
        self._filter_batch = list(returned)
        self._replaced, left = match_filtered(offered, returned)
        self.tracker.left_out(offered, left)

    def to_send(self, items: list[Any]) -> tuple[list[Any], list[Any]]:
        """The list to send for the model's ``items``, and the offered items it replaced."""
        batch = self._filter_batch
        if batch is not None and _all_in(items, batch):
            return list(items), self._replaced
        return self.tracker.reduce(items), []

    def request(
        self, items: list[Any], streamed: bool, *, replaced: list[Any], hidden_retries: bool
    ) -> RequestCall:
        """Mark ``items`` sent as one request; the returned call settles it exactly once."""
        if self._run is not None:
            self._run.sent = True
        self._trace_repairs()
        if streamed:
            self.partial = PartialOutput()
        call = RequestCall(
            self, items, streamed, replaced=replaced, hidden_retries=hidden_retries, run=self._run
        )
        self._call = call
        return call

    def _mark_repairs_reported(self) -> None:
        repairs = self.tracker.repairs
        self._reported = repairs[-1] if repairs else None

    def _trace_repairs(self) -> None:
        """Show the open calls this request closes as a span in the run's trace."""
        repairs = self.tracker.repairs
        if not repairs or repairs[-1] is self._reported:
            return
        fresh = repairs
        for index in range(len(repairs) - 1, -1, -1):
            if repairs[index] is self._reported:
                fresh = repairs[index + 1 :]
                break
        self._reported = repairs[-1]
        repair_span(fresh)

    def decided(self) -> None:
        """The filter's batch went out; a later request decides afresh."""
        self._filter_batch = None
        self._replaced = []

    # -- resuming ----------------------------------------------------------------------------

    def prepare_resume(self, run_state: RunState[Any]) -> None:
        """Align the ledger with a RunState about to be resumed, or refuse a foreign one."""
        if self._resumed is not None and self._resumed[0] is run_state:
            return  # already aligned (loads() does it, then run() is given the same RunState)
        tracker = self.tracker
        data = run_state_data(run_state)
        previous_response_id, conversation_id = _compat.run_state_ids(run_state)
        if tracker.conversation_id is None and _compat.run_state_is_chained(run_state):
            # The SDK resumes a chained run from its newest response that has an id.
            previous_response_id = newest_response_id(data) or previous_response_id
            # Responses the run never processed (a cancel right after response.completed)
            # are stepped back over, so the resumed run forks from where it stands.
            tracker.rollback_to(previous_response_id)
        for name, theirs, ours in (
            ("previous_response_id", previous_response_id, tracker.previous_response_id),
            ("conversation_id", conversation_id, tracker.conversation_id),
        ):
            # A cursor a compaction or re-seed replaced is this conversation's own past.
            if theirs is not None and theirs != ours and not tracker.supersedes(theirs):
                raise MixedStateOwnerError(
                    f"the RunState being resumed has {name}={theirs!r}, but this "
                    f"conversation's ledger has {ours!r}: it belongs to another "
                    "conversation (restore both with ConversationState.loads)"
                )
        self.harvest(data)
        self._resumed = (run_state, processed_ids(data), frozenset(uncommitted_calls(data)))


def _all_in(items: list[Any], batch: list[Any]) -> bool:
    allowed = {id(item) for item in batch}
    return all(id(item) in allowed for item in items)


def _input_items(input: Any) -> list[Any]:
    if isinstance(input, str):
        return [{"role": "user", "content": input}]
    if isinstance(input, list):
        return list(input)
    return []


def _staged_input(run_state: RunState[Any]) -> list[Any]:
    """The input staged on ``run_state`` for its next model call (``RunState.add_input``).

    The public ``pending_input`` exists from openai-agents 0.24; before it nothing is staged.
    """
    staged = getattr(run_state, "pending_input", None)
    return list(staged) if isinstance(staged, list) else []
