"""``ConversationState``: the one owner of a conversation's state, configured per run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents import Agent, RunConfig, RunHooks, Runner, RunState
from agents.exceptions import InputGuardrailTripwireTriggered
from agents.memory import Session
from agents.result import RunResult, RunResultStreaming
from openai import AsyncOpenAI

from . import _compat, _persistence
from ._compaction import CompactionMode, CompactionResult
from ._rejection import reject_when_told
from ._repairs import OpenCallsPolicy
from ._run import RunLifecycle
from ._run_config import as_run_config
from ._run_prep import ledger_snapshot, prepare_run, show_app_agents
from ._state_view import _StateView
from ._tracker import ServerConversationTracker
from ._validation import validate_run_settings
from .owners import OWNERS, Owner
from .stores.ledger import use_ledger_codec
from .types import StrategyName

__all__ = ["ConversationState", "StrategyName"]


class ConversationState(_StateView):
    """One per conversation: names its state owner and, for server strategies, holds the ledger.

    Build it with one of the constructors — :meth:`replay`, :meth:`session`,
    :meth:`previous_response` or :meth:`conversation` — then run agents with :meth:`run` /
    :meth:`run_streamed`, or pass :meth:`run_config` to ``Runner`` yourself.
    """

    def __init__(
        self,
        strategy: StrategyName,
        *,
        tracker: ServerConversationTracker | None = None,
        session: Session | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self._start(OWNERS[strategy].create(tracker=tracker, session=session, client=client))

    @classmethod
    def _over(cls, owner: Owner) -> ConversationState:
        state_cls = ServerConversationState if owner.lifecycle is not None else ConversationState
        state = state_cls.__new__(state_cls)
        state._start(owner)  # noqa: SLF001 (the class's own constructor path)
        return state

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def replay(cls) -> ConversationState:
        """The application owns history and replays it (e.g. ``result.to_input_list()``).

        Every run of the conversation gets one ``RunConfig.group_id`` (unless the run config
        sets one), so the SDK sends one stable ``prompt_cache_key`` instead of a new one per
        run; as always, only to models it gives a default key, and never over a key set in
        the model settings.
        """
        return cls("replay")

    @classmethod
    def session(cls, session: Session) -> ConversationState:
        """An SDK ``Session`` owns history; runs get ``session=`` and no server ids."""
        return cls("session", session=session)

    @classmethod
    def previous_response(
        cls,
        previous_response_id: str | None = None,
        *,
        prompt_cache_key: str | None = None,
        open_calls: OpenCallsPolicy = "interrupt",
    ) -> ServerConversationState:
        """The Responses API owns history, chained by ``previous_response_id``.

        ``None`` starts a new chain that then follows itself, like ``auto_previous_response_id``.
        Every request of the conversation carries one stable ``prompt_cache_key`` (generated
        unless given, and kept across dumps/loads) unless the model settings set their own.
        ``open_calls`` says what closes a tool call an interrupted run left without output when
        the run never produced one: ``"interrupt"`` (an output saying so) or ``"raise"``
        (:class:`~agents_state_ext.OpenToolCallsError`; see :meth:`close_tool_calls`).
        """
        tracker = ServerConversationTracker(
            strategy="previous_response",
            previous_response_id=previous_response_id,
            prompt_cache_key=prompt_cache_key,
            open_calls_policy=open_calls,
        )
        return cls.for_tracker(tracker)

    @classmethod
    def conversation(
        cls,
        conversation_id: str,
        *,
        client: AsyncOpenAI | None = None,
        prompt_cache_key: str | None = None,
        open_calls: OpenCallsPolicy = "interrupt",
    ) -> ServerConversationState:
        """The Conversations API owns history under ``conversation_id``.

        ``client`` (an ``AsyncOpenAI``) is used to read the conversation's items when a request
        failed after the server may have accepted it; by default the model's own client is used.
        The prompt cache key defaults to one derived from the conversation id. ``open_calls``
        is as for :meth:`previous_response`.
        """
        tracker = ServerConversationTracker(
            strategy="conversation",
            conversation_id=conversation_id,
            prompt_cache_key=prompt_cache_key or f"agents-state-ext:{conversation_id}",
            open_calls_policy=open_calls,
        )
        return cls.for_tracker(tracker, client=client)

    @classmethod
    def for_tracker(
        cls, tracker: ServerConversationTracker, *, client: AsyncOpenAI | None = None
    ) -> ServerConversationState:
        """A server strategy's state around an existing ledger (its strategy is the tracker's).

        What :meth:`previous_response`, :meth:`conversation` and :meth:`loads_ledger` return;
        ``client`` is as for :meth:`conversation`.
        """
        return ServerConversationState(tracker.strategy, tracker=tracker, client=client)

    # -- configuring runs --------------------------------------------------------------------

    def run_config(self, base: RunConfig | Mapping[str, Any] | None = None) -> RunConfig:
        """A copy of ``base`` with this conversation's wrapping model, provider and filter.

        For server strategies every model resolved by the run goes through the ledger, and the
        ``call_model_input_filter`` of ``base`` (if any) is wrapped by
        :func:`~agents_state_ext.tracked_input_filter`. ``base`` may be a dict of ``RunConfig``
        fields, as ``Runner.run`` takes one.
        """
        base = as_run_config(base) or RunConfig()
        validate_run_settings(self, run_config=base)
        return self._owner.configure(base, adapter=True)

    def runner_kwargs(
        self,
        run_config: RunConfig | Mapping[str, Any] | None = None,
        *,
        hooks: RunHooks[Any] | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments that make a ``Runner`` call a run of this conversation.

        ``Runner.run(state.bind(agent), input, **state.runner_kwargs())`` (or ``run_streamed``)
        sends what ``state.run(agent, input)`` sends: ``run_config`` is :meth:`run_config` of
        ``run_config``; a server strategy adds its cursor (``previous_response_id`` with
        ``auto_previous_response_id=True``, or ``conversation_id``) so the SDK takes its
        server-managed path, and ``hooks`` that record each tool output in the ledger (then
        call ``hooks``); the session strategy adds its ``session``. Take one per run: a second
        run while one is in flight is refused at its first request
        (:class:`~agents_state_ext.RunInProgressError`).
        """
        kwargs: dict[str, Any] = {"run_config": self.run_config(run_config)}
        if hooks is not None:
            kwargs["hooks"] = hooks
        return self._owner.owned(kwargs)

    def bind(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent``'s graph whose own ``Model`` instances go through the ledger.

        :meth:`run` does this for you. Call it when you run ``Runner`` yourself with
        :meth:`run_config` and an agent (or a handoff target) carries a ``Model`` instance
        rather than a model name. Under the session strategy the copy's handoff input filters
        shape the model's input but leave the session's history whole; replay returns
        ``agent`` as it is.
        """
        return self._owner.bind_graph(agent)[0]

    # -- running -----------------------------------------------------------------------------

    async def run(self, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> RunResult:
        """Run ``agent`` on ``input`` under this conversation's state (``Runner.run`` kwargs ok).

        For server strategies a run is a transaction: if an input guardrail trips, the rejected
        input is dropped and the cursor goes back to where the run began.
        """
        lifecycle = self._lifecycle
        if lifecycle is not None:
            lifecycle.ensure_idle()
        bound, graph, kwargs = prepare_run(
            self._owner, self.downgrades, agent, input, runner_kwargs
        )
        snapshot = ledger_snapshot(self.tracker, bound, kwargs["run_config"])
        copied = bound is not agent
        if lifecycle is not None:
            lifecycle.begin(input, graph)
        result: RunResult | None = None
        error: BaseException | None = None
        try:
            result = await Runner.run(bound, input, **kwargs)
            return result
        except InputGuardrailTripwireTriggered:
            self._restore(snapshot)
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if lifecycle is not None:
                lifecycle.end(result, error)
            show_app_agents(copied, input, result)

    def run_streamed(
        self, agent: Agent[Any], input: Any, **runner_kwargs: Any
    ) -> RunResultStreaming:
        """Like :meth:`run`, streamed; the same requests go over the wire."""
        lifecycle = self._lifecycle
        if lifecycle is not None:
            lifecycle.ensure_idle()
        bound, graph, kwargs = prepare_run(
            self._owner, self.downgrades, agent, input, runner_kwargs
        )
        snapshot = ledger_snapshot(self.tracker, bound, kwargs["run_config"])
        copied = bound is not agent
        if lifecycle is not None:
            lifecycle.begin(input, graph)
        try:
            result = Runner.run_streamed(bound, input, **kwargs)
        except BaseException as exc:
            if lifecycle is not None:
                lifecycle.end(None, exc)
            show_app_agents(copied, input, None)
            raise

        def finished(_: object = None) -> None:
            if lifecycle is not None:
                task = result.run_loop_task
                error = _compat.stored_stream_exception(result)
                if task is not None and not task.cancelled() and task.exception() is not None:
                    error = task.exception()
                lifecycle.end(result, error)
            show_app_agents(copied, input, result)

        task = result.run_loop_task
        if task is None:
            finished()
        else:
            task.add_done_callback(finished)
        if lifecycle is None:
            return result
        # Only once the app sees the tripwire is the input rejected (see _rejection).
        reject_when_told(result, lambda: lifecycle.rewind(snapshot))
        return result

    # -- compaction ----------------------------------------------------------------------------

    async def compact(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        items: list[Any] | None = None,
        mode: CompactionMode = "auto",
        store: bool = True,
    ) -> CompactionResult:
        """Compact the conversation; the compacted window goes to its one owner, only there.

        - previous_response: ``mode="previous_response_id"`` (chosen by ``"auto"`` when there
          is a stored chain) compacts the server chain; if the server no longer knows it,
          ``"auto"`` falls back to input mode with ``items`` (without them,
          :class:`~agents_state_ext.PreviousResponseNotFoundError`). ``mode="input"`` (chosen
          when ``store=False`` or there is no chain) compacts ``items``, which must carry every
          item the server acknowledged that has an id, else
          :class:`~agents_state_ext.IncompleteHistoryError`; with no chain yet, the history the
          ledger holds for the new one (an earlier window) is compacted and replaced. The next
          run sends the window once, starting a new chain.
        - conversation: a request the server may have accepted is settled first; the
          conversation's items (or ``items``, checked the same way) are compacted and the
          window seeds a new server conversation, without the old item ids, that the state
          follows from then on.
        - session: the session's items are compacted and the session is rewritten to hold the
          window (restored if that fails); ``items`` may only repeat them.
        - replay: ``items`` are compacted and the window is returned for the app to replay.

        Refused while a run is in flight (:class:`~agents_state_ext.RunInProgressError`) or
        while the server holds tool calls without outputs
        (:class:`~agents_state_ext.OpenToolCallsError`). A RunState made before the compaction
        still loads and resumes, on the compacted window. See docs/resume.md.
        """
        return await self._owner.compact(
            client=client, model=model, items=items, mode=mode, store=store
        )

    # -- durability ----------------------------------------------------------------------------

    def dumps(
        self,
        result_or_run_state: Any,
        *,
        key: bytes | str | None = None,
        context_serializer: Any = None,
    ) -> str:
        """Serialize a run (its result or ``RunState``) and this conversation's ledger together.

        The versioned envelope holds the SDK's RunState JSON, the strategy, the tracker (cursor,
        acknowledged ids, pending input) and the partial output of a cancelled stream. With
        ``key`` it is signed (HMAC-SHA256) so :meth:`loads` rejects a changed blob. No API key
        is written.
        """
        return _persistence.dump_state(
            self._owner, result_or_run_state, key=key, context_serializer=context_serializer
        )

    @classmethod
    async def loads(
        cls,
        agent: Agent[Any],
        blob: str | bytes,
        *,
        key: bytes | str | None = None,
        session: Session | None = None,
        client: AsyncOpenAI | None = None,
        context_deserializer: Any = None,
    ) -> tuple[ConversationState, RunState[Any]]:
        """Restore a conversation and its RunState from :meth:`dumps`; resume with :meth:`run`.

        Malformed, truncated, tampered (with ``key``) or newer-version blobs raise
        :class:`~agents_state_ext.StateBlobError`. ``agent`` is the run's starting agent; the
        returned RunState is already bound to the restored ledger. A session conversation
        needs its ``session`` again.
        """
        owner, run_state = await _persistence.load_state(
            agent, blob, key=key, session=session, client=client,
            context_deserializer=context_deserializer,
        )  # fmt: skip
        return cls._over(owner), run_state

    def dumps_ledger(self, *, key: bytes | str | None = None) -> str:
        """Serialize the ledger alone, without a run: what a store keeps between runs.

        The envelope (format ``agents-state-ext/ledger``) holds the strategy, the tracker and
        the partial output of a cancelled stream. Taken during a run, a request in flight is
        kept as maybe-accepted (conversation) or pending (previous_response), exactly as in
        :meth:`dumps`. Replay and session conversations keep no ledger: ``ValueError``.
        """
        return _persistence.dump_ledger(self._owner, key=key)

    @classmethod
    def loads_ledger(
        cls,
        blob: str | bytes,
        *,
        key: bytes | str | None = None,
        client: AsyncOpenAI | None = None,
    ) -> ServerConversationState:
        """Restore a conversation from :meth:`dumps_ledger`; its next run continues the ledger.

        A malformed, tampered (with ``key``) or newer blob raises
        :class:`~agents_state_ext.StateBlobError`. ``client`` is as for :meth:`conversation`.
        """
        state = cls._over(_persistence.load_ledger(blob, key=key, client=client))
        assert isinstance(state, ServerConversationState)  # a ledger blob names a server owner
        return state

    def _restore(self, snapshot: dict[str, Any] | None) -> None:
        if self._lifecycle is not None:
            self._lifecycle.rewind(snapshot)

    def __repr__(self) -> str:
        return f"ConversationState(strategy={self.strategy!r}, tracker={self.tracker!r})"


class ServerConversationState(ConversationState):
    """A :class:`ConversationState` whose history a server owns (Responses or Conversations API).

    What :meth:`ConversationState.previous_response`, :meth:`ConversationState.conversation`
    and :meth:`ConversationState.loads_ledger` return: the same object, typed so that its
    ledger and lifecycle are never ``None``.
    """

    @property
    def tracker(self) -> ServerConversationTracker:
        """The ledger: what the server holds, what was sent and acknowledged."""
        lifecycle = self._lifecycle
        assert lifecycle is not None  # the constructor requires a tracker
        return lifecycle.tracker

    @property
    def lifecycle(self) -> RunLifecycle:
        """The run lifecycle (claim, requests, end) over the ledger."""
        lifecycle = super().lifecycle
        assert lifecycle is not None  # the constructor requires a tracker
        return lifecycle


# HeldState (in the stores, below this layer) reads held ledgers back through this.
use_ledger_codec(ConversationState.loads_ledger)
