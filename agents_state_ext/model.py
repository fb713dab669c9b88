"""The wrapping ``Model``: the one interception point where the ledger meets every model request.

Streaming and non-streaming share :class:`~agents_state_ext.run.RequestCall`, so both paths
mark, acknowledge and rewind exactly the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
)

from . import _compat
from ._stored import completed_event, stored_response
from .errors import MixedStateOwnerError
from .run import REQUEST_HISTORY, PartialOutput, RequestCall, RunLifecycle, SentRequest
from .tracker import ServerConversationTracker

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import TResponseInputItem, TResponseStreamEvent
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


class TrackedModel(Model):
    """Wraps any ``Model`` so the conversation's ledger sees and shapes every request.

    Ids that are not the ledger's own raise ``MixedStateOwnerError`` before any request; input
    the ledger holds as sent-but-unacknowledged goes back in front; anything acknowledged is
    dropped; the exact list is marked sent, then acknowledged on success or rewound on any
    failure or cancellation. Calls from another SDK run (``agent.as_tool()``) pass through.
    """

    def __init__(self, inner: Model, lifecycle: RunLifecycle) -> None:
        self.inner = inner
        self.lifecycle = lifecycle

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
        if not lifecycle.claims(_compat.current_run_owner()):
            return None
        _check_ids(lifecycle.tracker, previous_response_id, conversation_id)
        await lifecycle.settle(self.inner)
        stored = lifecycle.replay()
        if stored is not None:
            return stored_response(stored)
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else input
        send, replaced = lifecycle.to_send(items)
        return lifecycle.request(
            send, streamed, replaced=replaced, hidden_retries=self._hidden_retries()
        )

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
        if isinstance(call, ModelResponse):
            return call
        if call is None:
            return await self.inner.get_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            )  # fmt: skip
        await _checkpoint_before(call)
        with call.guard():
            response = await self.inner.get_response(
                system_instructions, call.items, self._settings(model_settings), tools,
                output_schema, handoffs, tracing, previous_response_id=call.previous_response_id,
                conversation_id=call.conversation_id, prompt=prompt,
            )  # fmt: skip
        _succeed(call, response.response_id, list(response.output), self.inner)
        await self.lifecycle.checkpoint()
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
        if isinstance(call, ModelResponse):
            # Answered from the ledger: the stream "completes" at once with the stored response.
            self.lifecycle.partial = PartialOutput(response_id=call.response_id, completed=True)
            yield completed_event(call)
            return
        if call is None:
            async for event in self.inner.stream_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            ):  # fmt: skip
                yield event
            return
        partial = self.lifecycle.partial or PartialOutput()
        await _checkpoint_before(call)
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
                    _succeed(
                        call, event.response.id or None, list(event.response.output), self.inner
                    )
                    await self.lifecycle.checkpoint()
                yield event
            if not call.done:
                call.fail(None)

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

    async def _cleanup_on_run_end(self, owner: object) -> None:
        self.lifecycle.release(owner)
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
        key = self.lifecycle.tracker.prompt_cache_key
        return dataclasses.replace(settings, extra_args={**extra, "prompt_cache_key": key})

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.inner.close()


class TrackedModelProvider(ModelProvider):
    """Wraps a ``ModelProvider`` so every model it resolves goes through the ledger."""

    def __init__(self, inner: ModelProvider, lifecycle: RunLifecycle) -> None:
        self.inner = inner
        self.lifecycle = lifecycle

    def get_model(self, model_name: str | None) -> Model:
        """The inner provider's model for ``model_name``, wrapped."""
        model = self.inner.get_model(model_name)
        if isinstance(model, TrackedModel):
            return model
        return TrackedModel(model, self.lifecycle)

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()


def _succeed(call: RequestCall, response_id: str | None, output: list[Any], model: Model) -> None:
    if call.done:
        return
    if response_id is None and call.lifecycle.tracker.strategy == "previous_response":
        call.fail(None)
        raise _no_response_id(model)
    call.succeed(response_id, output)


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
