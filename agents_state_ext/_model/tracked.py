"""``TrackedModel``: the one interception point where the ledger meets every model request.

Streaming and non-streaming share :class:`~agents_state_ext._request.RequestCall`, so both
paths mark, acknowledge and rewind exactly the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
)

from .. import _compat
from .._request import PartialOutput, RequestCall
from .._run import RunLifecycle
from .._stored import completed_event, stored_response
from .._tracker import ServerConversationTracker
from ..errors import MixedStateOwnerError
from .base import ModelCall, WrappedModel, WrappedProvider, release_inner
from .recorded import innermost

if TYPE_CHECKING:
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings

__all__ = ["TrackedModel", "TrackedModelProvider"]


class TrackedModel(WrappedModel):
    """Wraps any ``Model`` so the conversation's ledger sees and shapes every request.

    Ids that are not the ledger's own raise ``MixedStateOwnerError`` before any request; input
    the ledger holds as sent-but-unacknowledged goes back in front; anything acknowledged is
    dropped; the exact list is marked sent, then acknowledged on success or rewound on any
    failure or cancellation. Calls from another SDK run (``agent.as_tool()``) pass through.
    """

    def __init__(self, inner: Model, lifecycle: RunLifecycle, run: object | None = None) -> None:
        super().__init__(inner)
        self.lifecycle = lifecycle
        self.run = run
        """The run configuration this wrapper was made for (its provider), if known: an
        ``agent.as_tool()`` sub-run shares its parent's, a concurrent run has its own."""

    def serves(self, lifecycle: RunLifecycle) -> bool:
        """Whether this wrapper sends through ``lifecycle``'s ledger."""
        return self.lifecycle is lifecycle

    # -- shared bookkeeping ------------------------------------------------------------------

    async def _begin(
        self,
        input: str | list[TResponseInputItem],
        previous_response_id: str | None,
        conversation_id: str | None,
        streamed: bool,
    ) -> RequestCall | ModelResponse | None:
        lifecycle = self.lifecycle
        if not lifecycle.claims(_compat.current_run_owner(), self.run):
            return None
        _check_ids(lifecycle.tracker, previous_response_id, conversation_id)
        real = innermost(self.inner)
        if lifecycle.tracker.uncertain:  # as settle() checks first, without its coroutine
            await lifecycle.settle(real)
        stored = lifecycle.replay()
        if stored is not None:
            return stored_response(stored)
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else input
        send, replaced = lifecycle.to_send(items)
        hidden_retries = getattr(_compat.inner_openai_client(real), "max_retries", 1) != 0
        return lifecycle.request(send, streamed, replaced=replaced, hidden_retries=hidden_retries)

    # -- Model API ---------------------------------------------------------------------------

    async def _respond(self, call: ModelCall) -> ModelResponse:
        """Get a response through the ledger (see the class docstring)."""
        request = await self._begin(
            call.input, call.previous_response_id, call.conversation_id, streamed=False
        )
        if isinstance(request, ModelResponse):
            return request
        if request is None:
            return await call.respond(self.inner)
        await _checkpoint_before(request)
        with request.guard():
            response = await self._sent(call, request).respond(self.inner)
        _succeed(request, response.response_id, list(response.output), self.inner)
        await self.lifecycle.checkpoint()
        return response

    async def _stream(self, call: ModelCall) -> AsyncIterator[TResponseStreamEvent]:
        """Stream a response through the ledger; a cancelled stream keeps its partial text."""
        request = await self._begin(
            call.input, call.previous_response_id, call.conversation_id, streamed=True
        )
        if isinstance(request, ModelResponse):
            # Answered from the ledger: the stream "completes" at once with the stored response.
            self.lifecycle.partial = PartialOutput(response_id=request.response_id, completed=True)
            yield completed_event(request)
            return
        if request is None:
            async for event in call.stream(self.inner):
                yield event
            return
        partial = self.lifecycle.partial or PartialOutput()
        await _checkpoint_before(request)
        with request.guard():
            async for event in self._sent(call, request).stream(self.inner):
                if isinstance(event, ResponseCreatedEvent):
                    partial.response_id = event.response.id
                elif isinstance(event, ResponseTextDeltaEvent):
                    partial.text += event.delta
                elif isinstance(event, ResponseCompletedEvent):
                    partial.completed = True
                    # Acknowledge before yielding: the SDK may close us at this yield.
                    _succeed(
                        request, event.response.id or None, list(event.response.output), self.inner
                    )
                    await self.lifecycle.checkpoint()
                yield event
            if not request.done:
                request.fail(None)

    def _sent(self, call: ModelCall, request: RequestCall) -> ModelCall:
        """``call`` as the ledger sends it: its items, its cursor, the conversation's cache key."""
        return ModelCall(
            call.system_instructions,
            request.items,
            self._settings(call.model_settings),
            call.tools,
            call.output_schema,
            call.handoffs,
            call.tracing,
            request.previous_response_id,
            request.conversation_id,
            call.prompt,
        )

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        """Delegate with the ids really sent; a stateful request not known safe is unsafe."""
        lifecycle = self.lifecycle
        if not lifecycle.owns(_compat.current_run_owner()):
            return self.inner.get_retry_advice(request)
        last = lifecycle.requests[-1] if lifecycle.requests else None
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

    async def release_run(self, owner: object) -> None:
        """The SDK run ``owner`` ended: release its claim on the ledger, then the inner model's."""
        self.lifecycle.release(owner)
        await release_inner(self.inner, owner)

    def sends_default_prompt_cache_key(self) -> bool:
        """Never: the SDK's default key is new every run; one per conversation is set instead."""
        return False

    def _settings(self, settings: ModelSettings) -> ModelSettings:
        extra = settings.extra_args or {}
        body = settings.extra_body if isinstance(settings.extra_body, dict) else {}
        if "prompt_cache_key" in extra or "prompt_cache_key" in body:
            return settings
        if not _compat.supports_default_prompt_cache_key(innermost(self.inner)):
            return settings
        key = self.lifecycle.tracker.prompt_cache_key
        return dataclasses.replace(settings, extra_args={**extra, "prompt_cache_key": key})


class TrackedModelProvider(WrappedProvider):
    """Wraps a ``ModelProvider`` so every model it resolves goes through the ledger."""

    def __init__(self, inner: ModelProvider, lifecycle: RunLifecycle) -> None:
        super().__init__(inner)
        self.lifecycle = lifecycle

    def _wrap(self, model: Model) -> Model:
        """``model`` through the ledger (one wrapper per model)."""
        if isinstance(model, TrackedModel):
            return model
        return TrackedModel(model, self.lifecycle, run=self)


def _succeed(call: RequestCall, response_id: str | None, output: list[Any], model: Model) -> None:
    if call.done:
        return
    if response_id is None and call.conversation_id is None:  # a chain needs every id
        call.fail(None)
        raise _no_response_id(model)
    call.succeed(response_id, output)
    call.lifecycle.decided()


async def _checkpoint_before(call: RequestCall) -> None:
    """Save the ledger with ``call`` marked sent, before it goes out; if that fails, withdraw it."""
    try:
        await call.lifecycle.checkpoint()
    except BaseException as exc:
        call.withdraw(exc)
        raise


def _check_ids(
    tracker: ServerConversationTracker,
    previous_response_id: str | None,
    conversation_id: str | None,
) -> None:
    if (
        previous_response_id is not None
        and previous_response_id != tracker.previous_response_id
        # A chain a compaction or re-seed replaced (a resumed RunState's): sent on ours.
        and not tracker.supersedes(previous_response_id)
    ):
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
