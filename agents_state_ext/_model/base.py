"""The one base of the library's wrapping models: the SDK's model call, restated once.

The SDK's ``Model`` takes ten arguments per call. :class:`WrappedModel` takes them once and
hands its subclass one :class:`ModelCall` value (``_respond`` for ``get_response``,
``_stream`` for ``stream_response``); the subclass passes it on to the model it wraps, changed with
:meth:`ModelCall.but`. :class:`WrappedProvider` resolves every model of a provider wrapped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NamedTuple

from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest

from .. import _compat

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.tool import Tool
    from openai.types.responses.response_prompt_param import ResponsePromptParam

__all__ = ["ModelCall", "WrappedModel", "WrappedProvider", "release_inner"]


class ModelCall(NamedTuple):
    """One model call's arguments, as the SDK passed them to ``get_response``.

    A tuple: made once per model call, it costs no more than the call's own arguments.
    """

    system_instructions: str | None
    input: str | list[TResponseInputItem]
    model_settings: ModelSettings
    tools: list[Tool]
    output_schema: AgentOutputSchemaBase | None
    handoffs: list[Handoff]
    tracing: ModelTracing
    previous_response_id: str | None
    conversation_id: str | None
    prompt: ResponsePromptParam | None

    def but(self, **changes: Any) -> ModelCall:
        """This call with ``changes`` (the input, the settings or the cursor)."""
        return self._replace(**changes)

    async def respond(self, model: Model) -> ModelResponse:
        """``model.get_response`` with these arguments."""
        return await model.get_response(
            self.system_instructions, self.input, self.model_settings, self.tools,
            self.output_schema, self.handoffs, self.tracing,
            previous_response_id=self.previous_response_id,
            conversation_id=self.conversation_id, prompt=self.prompt,
        )  # fmt: skip

    def stream(self, model: Model) -> AsyncIterator[TResponseStreamEvent]:
        """``model.stream_response`` with these arguments."""
        return model.stream_response(
            self.system_instructions, self.input, self.model_settings, self.tools,
            self.output_schema, self.handoffs, self.tracing,
            previous_response_id=self.previous_response_id,
            conversation_id=self.conversation_id, prompt=self.prompt,
        )  # fmt: skip


class WrappedModel(_compat.ModelHooks, Model):
    """A ``Model`` over ``inner``: subclasses implement ``_respond`` and ``_stream``.

    Retry advice, the end of a run, the default prompt cache key and ``close`` go to the
    wrapped model unless a subclass says otherwise.
    """

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    async def _respond(self, call: ModelCall) -> ModelResponse:
        """Answer ``call`` (a ``get_response``)."""
        raise NotImplementedError

    def _stream(self, call: ModelCall) -> AsyncIterator[TResponseStreamEvent]:
        """Stream the answer to ``call`` (a ``stream_response``)."""
        raise NotImplementedError

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
        """Answer the SDK's model call (see the class docstring)."""
        return await self._respond(
            ModelCall(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id,
                conversation_id,
                prompt,
            )
        )

    def stream_response(
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
        """Stream the answer to the SDK's model call (see the class docstring)."""
        return self._stream(
            ModelCall(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id,
                conversation_id,
                prompt,
            )
        )

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        """The wrapped model's advice."""
        return self.inner.get_retry_advice(request)

    async def release_run(self, owner: object) -> None:
        """The SDK run ``owner`` ended: the wrapped model's cleanup runs."""
        await release_inner(self.inner, owner)

    def sends_default_prompt_cache_key(self) -> bool:
        """As the wrapped model would."""
        inner = self.inner
        if isinstance(inner, WrappedModel):
            return inner.sends_default_prompt_cache_key()
        return _compat.supports_default_prompt_cache_key(inner)

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.inner.close()


async def release_inner(inner: Model, owner: object) -> None:
    """Tell ``inner`` the SDK run ``owner`` ended (a wrapped model directly, else as the SDK)."""
    if isinstance(inner, WrappedModel):
        await inner.release_run(owner)
    else:
        await _compat.cleanup_on_run_end(inner, owner)


class WrappedProvider(ModelProvider):
    """A ``ModelProvider`` over ``inner`` whose every model is wrapped by ``_wrap``."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def _wrap(self, model: Model) -> Model:
        """``model`` wrapped (or as it is, when it already is)."""
        raise NotImplementedError

    def get_model(self, model_name: str | None) -> Model:
        """The inner provider's model for ``model_name``, wrapped."""
        return self._wrap(self.inner.get_model(model_name))

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()
