"""The wrapping ``Model``: the one interception point where the ledger meets every model request.

Streaming and non-streaming share :class:`_Call`, so both paths mark, acknowledge and rewind
exactly the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
)

from . import _compat
from ._items import item_to_dict
from .errors import MixedStateOwnerError
from .reconcile import reconcile_conversation
from .tracker import ServerConversationTracker

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.tool import Tool
    from openai.types.responses.response_prompt_param import ResponsePromptParam

__all__ = [
    "REQUEST_HISTORY",
    "PartialOutput",
    "SentRequest",
    "TrackedModel",
    "TrackedModelProvider",
]

REQUEST_HISTORY = 100
"""How many of a conversation's newest requests ``ConversationState.requests`` keeps."""


@dataclass
class PartialOutput:
    """What a streamed attempt produced before it ended: its response id and text so far."""

    response_id: str | None = None
    text: str = ""
    completed: bool = False


@dataclass
class SentRequest:
    """One request exactly as the wrapper sent it (for attempt records and tests)."""

    input: list[dict[str, Any]]
    previous_response_id: str | None
    conversation_id: str | None
    streamed: bool
    response_id: str | None = None
    error: str | None = None


@dataclass
class _Binding:
    """State shared by every wrapper of one conversation."""

    tracker: ServerConversationTracker
    owner: object | None = None
    filter_batch: list[Any] | None = None
    partial: PartialOutput | None = None
    requests: deque[SentRequest] = field(default_factory=lambda: deque(maxlen=REQUEST_HISTORY))
    reconcile_client: Any | None = None

    def claims(self, owner: object | None) -> bool:
        """Bind to the first run that calls; other runs (e.g. ``as_tool`` sub-runs) pass through."""
        if self.owner is None:
            self.owner = owner
            return True
        return self.owner is owner

    async def settle(self, model: object | None) -> None:
        """Reconcile an uncertain batch against the server before anything else is sent."""
        if not self.tracker.uncertain:
            return
        if isinstance(model, TrackedModel):
            model = model.inner
        client = self.reconcile_client or _compat.inner_openai_client(model)
        if client is None:
            raise RuntimeError(
                "conversation reconciliation needs an AsyncOpenAI client: pass client= to "
                "ConversationState.conversation(...)"
            )
        await reconcile_conversation(self.tracker, client)

    def release(self, owner: object | None = None) -> None:
        if owner is None or owner is self.owner:
            self.owner = None
            self.filter_batch = None
            self.tracker.end_run()


class _Call:
    """The bookkeeping of one request: mark sent, then acknowledge or rewind exactly once."""

    def __init__(
        self, binding: _Binding, items: list[Any], streamed: bool, *, hidden_retries: bool
    ) -> None:
        tracker = binding.tracker
        # A stateful request is never resent blindly by the openai client's own retries; when
        # the client makes none anyway, the SDK need not copy it per request to turn them off.
        self.hidden_retries = hidden_retries
        self.binding = binding
        self.items = items
        self.previous_response_id = tracker.previous_response_id
        self.conversation_id = tracker.conversation_id
        self.done = False
        self.record = SentRequest(
            input=[item_to_dict(i) for i in items],
            previous_response_id=self.previous_response_id,
            conversation_id=self.conversation_id,
            streamed=streamed,
        )
        tracker.mark_sent(items)
        binding.requests.append(self.record)

    def succeed(self, response_id: str | None, output: list[Any], model: Model) -> None:
        if self.done:
            return
        if response_id is None and self.binding.tracker.strategy == "previous_response":
            self.fail(None)
            raise _no_response_id(model)
        self.done = True
        self.record.response_id = response_id
        self.binding.tracker.acknowledge(response_id, output)
        self.binding.filter_batch = None

    def fail(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.record.error = type(error).__name__ if error is not None else "stream ended early"
        tracker = self.binding.tracker
        if tracker.strategy == "conversation":
            # The server may have accepted it: evidence decides before anything is re-sent.
            tracker.mark_uncertain()
        else:
            tracker.rewind()

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        try:
            if self.hidden_retries:
                with _compat.provider_retries_disabled():
                    yield
            else:
                yield
        except BaseException as exc:
            self.fail(exc)
            raise


class TrackedModel(Model):
    """Wraps any ``Model`` so the conversation's ledger sees and shapes every request.

    Ids that are not the ledger's own raise ``MixedStateOwnerError`` before any request; input
    the ledger holds as sent-but-unacknowledged goes back in front; anything acknowledged is
    dropped; the exact list is marked sent, then acknowledged on success or rewound on any
    failure or cancellation. Calls from another SDK run (``agent.as_tool()``) pass through.
    """

    def __init__(self, inner: Model, binding: _Binding) -> None:
        self.inner = inner
        self._binding = binding

    # -- shared bookkeeping ------------------------------------------------------------------

    async def _begin(
        self,
        input: str | list[TResponseInputItem],
        previous_response_id: str | None,
        conversation_id: str | None,
        streamed: bool,
    ) -> _Call | None:
        binding = self._binding
        if not binding.claims(_compat.current_run_owner()):
            return None
        tracker = binding.tracker
        _check_ids(tracker, previous_response_id, conversation_id)
        await binding.settle(self.inner)
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else input
        batch = binding.filter_batch
        # When the input filter already decided exactly this list, it is sent as it is.
        filtered = batch is not None and _all_in(items, batch)
        send = list(items) if filtered else tracker.reduce(items)
        if streamed:
            binding.partial = PartialOutput()
        return _Call(binding, send, streamed, hidden_retries=self._hidden_retries())

    def _hidden_retries(self) -> bool:
        client = _compat.inner_openai_client(self.inner)
        return getattr(client, "max_retries", 1) != 0

    # -- Model API ---------------------------------------------------------------------------

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        """Get a response through the ledger (see the class docstring)."""
        call = await self._begin(input, previous_response_id, conversation_id, streamed=False)
        if call is None:
            return await self.inner.get_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            )  # fmt: skip
        with call.guard():
            response = await self.inner.get_response(
                system_instructions, call.items, self._settings(model_settings), tools,
                output_schema, handoffs, tracing, previous_response_id=call.previous_response_id,
                conversation_id=call.conversation_id, prompt=prompt,
            )  # fmt: skip
        call.succeed(response.response_id, list(response.output), self.inner)
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Stream a response through the ledger; a cancelled stream keeps its partial text."""
        call = await self._begin(input, previous_response_id, conversation_id, streamed=True)
        if call is None:
            async for event in self.inner.stream_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            ):  # fmt: skip
                yield event
            return
        partial = self._binding.partial or PartialOutput()
        with call.guard():
            async for event in self.inner.stream_response(
                system_instructions, call.items, self._settings(model_settings), tools,
                output_schema, handoffs, tracing, previous_response_id=call.previous_response_id,
                conversation_id=call.conversation_id, prompt=prompt,
            ):  # fmt: skip
                if isinstance(event, ResponseCreatedEvent):
                    partial.response_id = event.response.id
                elif isinstance(event, ResponseTextDeltaEvent):
                    partial.text += event.delta
                elif isinstance(event, ResponseCompletedEvent):
                    partial.completed = True
                    # Acknowledge before yielding: the SDK may close us at this yield.
                    call.succeed(event.response.id or None, list(event.response.output), self.inner)
                yield event
            if not call.done:
                call.fail(None)

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        """Delegate with the ids really sent; a stateful request not known safe is unsafe."""
        binding = self._binding
        if binding.owner is None or binding.owner is not _compat.current_run_owner():
            return self.inner.get_retry_advice(request)
        last = binding.requests[-1] if binding.requests else None
        used = dataclasses.replace(
            request,
            previous_response_id=last.previous_response_id if last else None,
            conversation_id=last.conversation_id if last else None,
        )
        advice = self.inner.get_retry_advice(used)
        if used.previous_response_id is None and used.conversation_id is None:
            return advice
        if advice is None:
            return ModelRetryAdvice(
                suggested=False,
                replay_safety="unsafe",
                reason="stateful request without replay-safety evidence",
            )
        if advice.replay_safety != "safe":
            return dataclasses.replace(advice, replay_safety="unsafe")
        return advice

    async def _cleanup_on_run_end(self, owner: object) -> None:
        self._binding.release(owner)
        await self.inner._cleanup_on_run_end(owner)

    def _supports_default_prompt_cache_key(self) -> bool:
        # The SDK's default key is new every run; _settings() sets one per conversation instead.
        return False

    def _settings(self, settings: ModelSettings) -> ModelSettings:
        extra = settings.extra_args or {}
        body = settings.extra_body if isinstance(settings.extra_body, dict) else {}
        if "prompt_cache_key" in extra or "prompt_cache_key" in body:
            return settings
        if not _compat.supports_default_prompt_cache_key(self.inner):
            return settings
        key = self._binding.tracker.prompt_cache_key
        return dataclasses.replace(settings, extra_args={**extra, "prompt_cache_key": key})

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.inner.close()


class TrackedModelProvider(ModelProvider):
    """Wraps a ``ModelProvider`` so every model it resolves goes through the ledger."""

    def __init__(self, inner: ModelProvider, binding: _Binding) -> None:
        self.inner = inner
        self._binding = binding

    def get_model(self, model_name: str | None) -> Model:
        """The inner provider's model for ``model_name``, wrapped."""
        model = self.inner.get_model(model_name)
        if isinstance(model, TrackedModel):
            return model
        return TrackedModel(model, self._binding)

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()


def _all_in(items: list[Any], batch: list[Any]) -> bool:
    allowed = {id(item) for item in batch}
    return all(id(item) in allowed for item in items)


def _check_ids(
    tracker: ServerConversationTracker,
    previous_response_id: str | None,
    conversation_id: str | None,
) -> None:
    if previous_response_id is not None and previous_response_id != tracker.previous_response_id:
        raise MixedStateOwnerError(
            f"the run passed previous_response_id={previous_response_id!r}, but this "
            f"conversation's state is owned by agents-state-ext (its cursor is "
            f"{tracker.previous_response_id or tracker.conversation_id!r}); pass no ids to "
            "Runner and let ConversationState.run() chain the conversation"
        )
    if conversation_id is not None and conversation_id != tracker.conversation_id:
        raise MixedStateOwnerError(
            f"the run passed conversation_id={conversation_id!r}, but this conversation's "
            f"state is owned by agents-state-ext ({tracker.strategy} strategy, cursor "
            f"{tracker.previous_response_id or tracker.conversation_id!r}); pass no ids to "
            "Runner and let ConversationState.run() manage them"
        )


def _no_response_id(model: Model) -> MixedStateOwnerError:
    return MixedStateOwnerError(
        f"{type(model).__name__} returned a response without an id, so it cannot continue a "
        "previous_response_id chain: the Responses API cannot own this conversation's state. "
        "Use a Responses API model, or ConversationState.replay()"
    )
