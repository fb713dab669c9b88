"""What crossed the wire: one request as it went out (:class:`WireRequest`), and the tap
(:class:`RequestTap`) that one attempt's :class:`~._model.recorded.RecordedModel` feeds."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.models.interface import Model

from .._attempts import part_digest, request_digest
from .._items import item_to_dict, jsonable

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import TResponseInputItem
    from agents.model_settings import ModelSettings
    from agents.tool import Tool

__all__ = [
    "REQUEST_ID_HEADER",
    "RequestTap",
    "WireRequest",
    "model_name",
    "settings_json",
    "tool_definitions",
    "tools_digest",
    "wire_request",
]

REQUEST_ID_HEADER = "X-Client-Request-Id"
"""The header an attempt's request id is sent in (the OpenAI API logs it with the request)."""


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
