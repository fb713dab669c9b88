"""A response the server already holds, handed to a run as if the model had just answered."""

from __future__ import annotations

from typing import Any

from agents.items import ModelResponse
from agents.usage import Usage
from openai.types.responses import Response, ResponseCompletedEvent, ResponseOutputItem
from pydantic import TypeAdapter

from ._items import item_to_dict

__all__ = ["completed_event", "stored_response"]

_OUTPUT_ITEM: TypeAdapter[ResponseOutputItem] = TypeAdapter(ResponseOutputItem)


def stored_response(stored: dict[str, Any]) -> ModelResponse:
    """A ``ModelResponse`` for ``{"response_id", "output"}`` kept by the ledger (no usage: no
    request was made for it)."""
    output = [_OUTPUT_ITEM.validate_python(_output_form(item)) for item in stored["output"]]
    return ModelResponse(output=output, usage=Usage(), response_id=stored["response_id"])


def completed_event(response: ModelResponse) -> ResponseCompletedEvent:
    """The one ``response.completed`` event a stream of ``response`` needs."""
    body = Response.model_construct(
        id=response.response_id or "",
        object="response",
        created_at=0,
        status="completed",
        output=list(response.output),
        usage=None,
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        model="",
    )
    return ResponseCompletedEvent(type="response.completed", response=body, sequence_number=0)


def _output_form(item: Any) -> dict[str, Any]:
    """A stored item in its output form (a conversation item may lack output-only fields)."""
    data = dict(item_to_dict(item))
    if data.get("type") == "message" and data.get("role") == "assistant":
        data.setdefault("status", "completed")
        data["content"] = [
            {**part, "annotations": part.get("annotations", [])}
            if isinstance(part, dict) and part.get("type") == "output_text"
            else part
            for part in data.get("content") or []
        ]
    return data
