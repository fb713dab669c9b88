"""The wrapping ``Model``: the one interception point where the ledger meets every model request.

Streaming and non-streaming share :class:`~agents_state_ext._run.RequestCall`, so both paths
mark, acknowledge and rewind exactly the same way.

:class:`RecordedModel` (and :class:`RecordedModelProvider`) sit right against the real model,
under any ledger wrapper: they see each request exactly as it goes out (model, effective
settings, instructions, tool definitions, input, server ids), send the attempt's request id in
the ``X-Client-Request-Id`` header, and note the server's ``x-request-id`` — for
:class:`RequestTap`, which the chat layer turns into the attempt's record.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
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
from ._attempts import part_digest, request_digest
from ._items import item_to_dict, jsonable
from ._run import REQUEST_HISTORY, PartialOutput, RequestCall, RunLifecycle, SentRequest
from ._stored import completed_event, stored_response
from ._tracker import ServerConversationTracker
from .errors import MixedStateOwnerError

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.tool import Tool
    from openai.types.responses.response_prompt_param import ResponsePromptParam

__all__ = [
    "REQUEST_HISTORY",
    "REQUEST_ID_HEADER",
    "PartialOutput",
    "RecordedModel",
    "RecordedModelProvider",
    "RequestTap",
    "SentRequest",
    "TrackedModel",
    "TrackedModelProvider",
    "WireRequest",
]

REQUEST_ID_HEADER = "X-Client-Request-Id"
"""The header an attempt's request id is sent in (the OpenAI API logs it with the request)."""


class TrackedModel(_compat.ModelHooks, Model):
    """Wraps any ``Model`` so the conversation's ledger sees and shapes every request.

    Ids that are not the ledger's own raise ``MixedStateOwnerError`` before any request; input
    the ledger holds as sent-but-unacknowledged goes back in front; anything acknowledged is
    dropped; the exact list is marked sent, then acknowledged on success or rewound on any
    failure or cancellation. Calls from another SDK run (``agent.as_tool()``) pass through.
    """

    def __init__(self, inner: Model, lifecycle: RunLifecycle, run: object | None = None) -> None:
        self.inner = inner
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
        innermost = _innermost(self.inner)
        if lifecycle.tracker.uncertain:  # as settle() checks first, without its coroutine
            await lifecycle.settle(innermost)
        stored = lifecycle.replay()
        if stored is not None:
            return stored_response(stored)
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else input
        send, replaced = lifecycle.to_send(items)
        hidden_retries = getattr(_compat.inner_openai_client(innermost), "max_retries", 1) != 0
        return lifecycle.request(send, streamed, replaced=replaced, hidden_retries=hidden_retries)

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

    async def release_run(self, owner: object) -> None:
        """The SDK run ``owner`` ended: release its claim on the ledger, then the inner model's."""
        self.lifecycle.release(owner)
        await _compat.cleanup_on_run_end(self.inner, owner)

    def sends_default_prompt_cache_key(self) -> bool:
        """Never: the SDK's default key is new every run; one per conversation is set instead."""
        return False

    def _settings(self, settings: ModelSettings) -> ModelSettings:
        extra = settings.extra_args or {}
        body = settings.extra_body if isinstance(settings.extra_body, dict) else {}
        if "prompt_cache_key" in extra or "prompt_cache_key" in body:
            return settings
        if not _compat.supports_default_prompt_cache_key(_innermost(self.inner)):
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
        return TrackedModel(model, self.lifecycle, run=self)

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()


def _succeed(call: RequestCall, response_id: str | None, output: list[Any], model: Model) -> None:
    if call.done:
        return
    if response_id is None and call.conversation_id is None:  # a chain needs every id
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


# -- what crossed the wire ---------------------------------------------------------------------


@dataclass
class WireRequest:
    """One model request as it went out: what the model was given, in JSON form.

    ``settings`` are the effective model settings (the SDK's ``ModelSettings`` as JSON, unset
    values left out, the request-id header taken out of ``extra_headers``); ``tools`` the tool
    (and handoff) definitions in the Responses API's form; ``input`` the items sent.
    """

    model: str | None
    settings: dict[str, Any]
    instructions: str | None
    tools: list[dict[str, Any]]
    input: list[dict[str, Any]]
    previous_response_id: str | None = None
    conversation_id: str | None = None
    output_schema: dict[str, Any] | None = None
    prompt: Any = None
    streamed: bool = False

    def canonical(self) -> dict[str, Any]:
        """The request's content, as :func:`~agents_state_ext.request_digest` digests it."""
        data: dict[str, Any] = {
            "model": self.model,
            "settings": self.settings,
            "instructions": self.instructions,
            "tools": self.tools,
            "input": self.input,
            "previous_response_id": self.previous_response_id,
            "conversation_id": self.conversation_id,
        }
        if self.output_schema is not None:
            data["output_schema"] = self.output_schema
        if self.prompt is not None:
            data["prompt"] = self.prompt
        return data

    @functools.cached_property
    def digest(self) -> str:
        """The digest of :meth:`canonical`, taken when the request went out."""
        return request_digest(self.canonical())


@dataclass
class RequestTap:
    """What one attempt's requests were: fed by :class:`RecordedModel`, read by the chat layer.

    ``request_id`` (if set) goes out in the ``X-Client-Request-Id`` header of every request,
    unless the app set that header itself. ``first`` is the attempt's first request (the one
    that answers the user message), described in full; the later requests of the same run carry
    tool outputs and are only counted, not described (describing one digests its whole input).
    ``server_request_ids`` holds the ``x-request-id`` each answer carried (``None``: none yet).
    """

    request_id: str | None = None
    first: WireRequest | None = None
    server_request_ids: list[str | None] = field(default_factory=list)

    def reset(self) -> None:
        """Forget what was seen: the attempt sends its request again (a re-seeded try)."""
        self.first = None
        self.server_request_ids.clear()

    @property
    def server_request_id(self) -> str | None:
        """The server's request id of the first request that has one."""
        return next((i for i in self.server_request_ids if i), None)

    def with_header(self, settings: ModelSettings) -> ModelSettings:
        """``settings`` with the request id header merged into the app's own headers."""
        if self.request_id is None:
            return settings
        headers = dict(settings.extra_headers or {})
        if any(str(name).lower() == REQUEST_ID_HEADER.lower() for name in headers):
            return settings
        headers[REQUEST_ID_HEADER] = self.request_id
        return dataclasses.replace(settings, extra_headers=headers)

    def saw(self, describe: Callable[[], WireRequest]) -> int:
        """Note a request going out (``describe`` is called for the first only); its index."""
        if self.first is None:
            self.first = describe()
        self.server_request_ids.append(None)
        return len(self.server_request_ids) - 1

    def answered(self, index: int, server_request_id: str | None) -> None:
        """The answer to request ``index`` carried ``server_request_id``."""
        if server_request_id and 0 <= index < len(self.server_request_ids):
            self.server_request_ids[index] = server_request_id


def model_name(model: object) -> str:
    """The name a ``Model`` sends as ``model`` (its ``model`` attribute), else its type's name."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


def settings_json(settings: ModelSettings) -> dict[str, Any]:
    """Effective settings as JSON: unset values and the client-side ``retry`` left out."""
    try:
        data = settings.to_json_dict()
    except Exception:  # a setting pydantic cannot dump: keep what can be
        data = {
            f.name: getattr(settings, f.name)
            for f in dataclasses.fields(settings)
            if isinstance(getattr(settings, f.name), (str, int, float, bool, dict, list))
        }
    data.pop("retry", None)
    headers = data.get("extra_headers")
    if isinstance(headers, dict):
        headers = {k: v for k, v in headers.items() if str(k).lower() != REQUEST_ID_HEADER.lower()}
        data["extra_headers"] = headers or None
    return {k: v for k, v in data.items() if v is not None}


def tool_definitions(tools: list[Tool], handoffs: list[Handoff]) -> list[dict[str, Any]]:
    """The tool and handoff definitions a request carries, in the Responses API's form."""
    try:
        from agents.models.openai_responses import Converter

        converted = Converter.convert_tools(list(tools), list(handoffs))
        return [_plain(t) for t in converted.tools]
    except Exception:  # a tool the converter cannot place: describe each one plainly
        described: list[dict[str, Any]] = []
        for tool in tools:
            entry = {"type": type(tool).__name__, "name": getattr(tool, "name", None)}
            for key in ("description", "params_json_schema", "strict_json_schema"):
                if hasattr(tool, key):
                    entry[key] = getattr(tool, key)
            described.append(entry)
        for handoff in handoffs:
            described.append(
                {
                    "type": "handoff",
                    "name": handoff.tool_name,
                    "description": handoff.tool_description,
                    "parameters": handoff.input_json_schema,
                }
            )
        return described


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (TypedDicts, pydantic models, tuples)."""
    return json.loads(json.dumps(value, default=jsonable))


def wire_request(
    model: Model,
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    settings: ModelSettings,
    tools: list[Tool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff],
    *,
    previous_response_id: str | None,
    conversation_id: str | None,
    prompt: Any,
    streamed: bool,
) -> WireRequest:
    """The :class:`WireRequest` of one model call, as the model is about to send it."""
    items = [{"role": "user", "content": input}] if isinstance(input, str) else input
    schema = None
    if output_schema is not None and not output_schema.is_plain_text():
        schema = output_schema.json_schema()
    request = WireRequest(
        model=model_name(model),
        settings=settings_json(settings),
        instructions=system_instructions,
        tools=tool_definitions(tools, handoffs),
        input=[item_to_dict(i) for i in items],  # digested as JSON; never stored
        previous_response_id=previous_response_id,
        conversation_id=conversation_id,
        output_schema=_plain(schema) if schema is not None else None,
        prompt=_plain(prompt) if prompt is not None else None,
        streamed=streamed,
    )
    _ = request.digest  # now: the SDK may reuse the item objects after the call
    return request


def tools_digest(request: WireRequest) -> str | None:
    """The digest of a request's tool definitions (``None``: it sent none)."""
    return part_digest(request.tools) if request.tools else None


class RecordedModel(_compat.ModelHooks, Model):
    """Wraps the real ``Model`` so one attempt's :class:`RequestTap` sees every request it sends.

    It changes one thing on the wire: the tap's request id goes out in the
    ``X-Client-Request-Id`` header (merged with the app's ``extra_headers``).
    """

    def __init__(self, inner: Model, tap: RequestTap) -> None:
        self.inner = inner
        self.tap = tap

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
        """Note the request, send it with the request id header, note the server's id."""
        settings = self.tap.with_header(model_settings)
        index = self.tap.saw(
            functools.partial(
                wire_request, self.inner, system_instructions, input, model_settings, tools,
                output_schema, handoffs, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt, streamed=False,
            )
        )  # fmt: skip
        response = await self.inner.get_response(
            system_instructions, input, settings, tools, output_schema, handoffs, tracing,
            previous_response_id=previous_response_id, conversation_id=conversation_id,
            prompt=prompt,
        )  # fmt: skip
        self.tap.answered(index, response.request_id)
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
        """Like :meth:`get_response`, streamed; the server's id is read from the events."""
        settings = self.tap.with_header(model_settings)
        index = self.tap.saw(
            functools.partial(
                wire_request, self.inner, system_instructions, input, model_settings, tools,
                output_schema, handoffs, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt, streamed=True,
            )
        )  # fmt: skip
        async for event in self.inner.stream_response(
            system_instructions, input, settings, tools, output_schema, handoffs, tracing,
            previous_response_id=previous_response_id, conversation_id=conversation_id,
            prompt=prompt,
        ):  # fmt: skip
            response = getattr(event, "response", None)
            if response is not None:
                # The openai client puts the x-request-id header on the response objects.
                self.tap.answered(index, getattr(response, "_request_id", None))
            yield event

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        """The wrapped model's advice."""
        return self.inner.get_retry_advice(request)

    async def release_run(self, owner: object) -> None:
        """The SDK run ``owner`` ended: the wrapped model's cleanup runs."""
        await _compat.cleanup_on_run_end(self.inner, owner)

    def sends_default_prompt_cache_key(self) -> bool:
        """As the wrapped model would."""
        return _compat.supports_default_prompt_cache_key(self.inner)

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.inner.close()


class RecordedModelProvider(ModelProvider):
    """Wraps a ``ModelProvider`` so every model it resolves reports to ``tap``."""

    def __init__(self, inner: ModelProvider, tap: RequestTap) -> None:
        self.inner = inner
        self.tap = tap

    def get_model(self, model_name: str | None) -> Model:
        """The inner provider's model for ``model_name``, recorded."""
        model = self.inner.get_model(model_name)
        return model if isinstance(model, RecordedModel) else RecordedModel(model, self.tap)

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()


def _innermost(model: Model) -> Model:
    """The real model under any :class:`RecordedModel` (its client, its cache-key support)."""
    while isinstance(model, RecordedModel):
        model = model.inner
    return model
