"""``RecordedModel``: one attempt's requests exactly as they go out, for its record.

It sits right against the real model, under any ledger wrapper: it sees each request as sent
(model, effective settings, instructions, tool definitions, input, server ids), sends the
attempt's request id in the ``X-Client-Request-Id`` header, and notes the server's
``x-request-id`` — for :class:`~._model.wire.RequestTap`, which the chat layer turns into the
attempt's record.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider

from .base import ModelCall, WrappedModel, WrappedProvider
from .wire import RequestTap, wire_request

if TYPE_CHECKING:
    from agents.items import TResponseStreamEvent

__all__ = ["RecordedModel", "RecordedModelProvider", "innermost"]


class RecordedModel(WrappedModel):
    """Wraps the real ``Model`` so one attempt's :class:`RequestTap` sees every request it sends.

    It changes one thing on the wire: the tap's request id goes out in the
    ``X-Client-Request-Id`` header (merged with the app's ``extra_headers``).
    """

    def __init__(self, inner: Model, tap: RequestTap) -> None:
        super().__init__(inner)
        self.tap = tap

    def _saw(self, call: ModelCall, streamed: bool) -> int:
        return self.tap.saw(
            functools.partial(
                wire_request, self.inner, call.system_instructions, call.input,
                call.model_settings, call.tools, call.output_schema, call.handoffs,
                previous_response_id=call.previous_response_id,
                conversation_id=call.conversation_id, prompt=call.prompt, streamed=streamed,
            )
        )  # fmt: skip

    async def _respond(self, call: ModelCall) -> ModelResponse:
        """Note the request, send it with the request id header, note the server's id."""
        index = self._saw(call, streamed=False)
        response = await call.but(model_settings=self.tap.with_header(call.model_settings)).respond(
            self.inner
        )
        self.tap.answered(index, response.request_id)
        return response

    async def _stream(self, call: ModelCall) -> AsyncIterator[TResponseStreamEvent]:
        """Like ``_respond``, streamed; the server's id is read from the events."""
        index = self._saw(call, streamed=True)
        sent = call.but(model_settings=self.tap.with_header(call.model_settings))
        async for event in sent.stream(self.inner):
            response = getattr(event, "response", None)
            if response is not None:
                # The openai client puts the x-request-id header on the response objects.
                self.tap.answered(index, getattr(response, "_request_id", None))
            yield event


class RecordedModelProvider(WrappedProvider):
    """Wraps a ``ModelProvider`` so every model it resolves reports to ``tap``."""

    def __init__(self, inner: ModelProvider, tap: RequestTap) -> None:
        super().__init__(inner)
        self.tap = tap

    def _wrap(self, model: Model) -> Model:
        """``model``, recorded."""
        return model if isinstance(model, RecordedModel) else RecordedModel(model, self.tap)


def innermost(model: Model) -> Model:
    """The real model under any :class:`RecordedModel` (its client, its cache-key support)."""
    while isinstance(model, RecordedModel):
        model = model.inner
    return model
