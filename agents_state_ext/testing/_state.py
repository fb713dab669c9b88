"""Server-side state of the mock: stored responses, conversations and request validation."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._items import CREATED_AT, ApiError, IdMinter, normalize_input, normalize_item
from ._reasoning import ENCRYPTED_INCLUDE, is_reasoning_model
from ._reasoning_rules import check_include, check_reasoning_input, invalid_item

__all__ = ["Conversation", "PreparedRequest", "ServerState", "StoredResponse"]

MAX_ITEMS_PER_CALL = 20
# A call item type -> the type of its output item.
_CALL_OUTPUT_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}


@dataclass
class StoredResponse:
    """A response the server stored, with the full context it was produced from."""

    body: dict[str, Any]
    transcript: list[dict[str, Any]]


@dataclass
class Conversation:
    """A server-side conversation: its metadata and items in insertion order."""

    id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The ``Conversation`` object of the API."""
        return {
            "id": self.id,
            "object": "conversation",
            "created_at": CREATED_AT,
            "metadata": copy.deepcopy(self.metadata),
        }


@dataclass
class PreparedRequest:
    """A validated ``POST /responses`` request with its server-side context and ids."""

    body: Mapping[str, Any]
    response_id: str
    history: list[dict[str, Any]]
    input: list[dict[str, Any]]
    previous_response_id: str | None
    conversation_id: str | None
    store: bool
    streamed: bool
    reasoning: bool = False
    """The answer leads with a reasoning item (see ``MockResponsesAPI(reasoning=...)``)."""
    include_encrypted: bool = False
    """The request's ``include`` asks for ``reasoning.encrypted_content``."""


def _conversation_id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        value = value.get("id")
    if not isinstance(value, str):
        raise ApiError(400, "Invalid type for 'conversation'.", param="conversation")
    return value


def _duplicate(item_id: str) -> ApiError:
    return ApiError(
        400,
        f"Duplicate item found with id {item_id}. Remove duplicate items from your input and "
        "try again.",
        param="input",
    )


def too_many_items(count: int) -> ApiError:
    """The 400 for more than 20 items in one conversations call."""
    return ApiError(
        400,
        f"Invalid 'items': array too long. Expected an array with maximum length "
        f"{MAX_ITEMS_PER_CALL}, but got an array with length {count} instead.",
        param="items",
        code="array_above_max_length",
    )


class ServerState:
    """Everything the fake server remembers; the oracle tests assert against."""

    def __init__(
        self,
        *,
        previous_response_not_found_status: int,
        reject_orphan_tool_calls: bool,
        model: str = "gpt-4.1",
        reasoning: bool | None = None,
        enforce_reasoning_rules: bool = True,
    ) -> None:
        self.ids = IdMinter()
        self.responses: dict[str, StoredResponse] = {}
        self.conversations: dict[str, Conversation] = {}
        self.items: dict[str, dict[str, Any]] = {}
        self.reasoning_of: dict[str, str] = {}
        """Every output item id the server produced -> its reasoning item's id (item metadata)."""
        self.produced: dict[str, list[str]] = {}
        """Response id -> the ids of its output items."""
        self._not_found_status = previous_response_not_found_status
        self._reject_orphans = reject_orphan_tool_calls
        self._model = model
        self._reasoning = reasoning
        self._reasoning_rules = enforce_reasoning_rules

    # -- lookups ------------------------------------------------------------------------------

    def conversation(self, conversation_id: str) -> Conversation:
        """The conversation, or the API's 404."""
        try:
            return self.conversations[conversation_id]
        except KeyError:
            raise ApiError(404, f"Conversation with id '{conversation_id}' not found.") from None

    def stored_response(self, response_id: str) -> StoredResponse:
        """A stored response, or the API's 404."""
        try:
            return self.responses[response_id]
        except KeyError:
            raise ApiError(404, f"Response with id '{response_id}' not found.") from None

    def previous_context(self, previous_id: str) -> list[dict[str, Any]]:
        """A copy of a stored response's transcript, or the API's "not found" error."""
        stored = self.responses.get(previous_id)
        if stored is None:
            raise ApiError(
                self._not_found_status,
                f"Previous response with id '{previous_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return copy.deepcopy(stored.transcript)

    def known_context(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The stored context a ``POST /responses`` body names, read only; [] when none is held."""
        previous_id = body.get("previous_response_id")
        if isinstance(previous_id, str) and previous_id in self.responses:
            return self.responses[previous_id].transcript
        value = body.get("conversation")
        if isinstance(value, Mapping):
            value = value.get("id")
        if isinstance(value, str) and value in self.conversations:
            return self.conversations[value].items
        return []

    # -- conversations ------------------------------------------------------------------------

    def new_items(
        self, raw: Any, existing: Iterable[Mapping[str, Any]] = ()
    ) -> list[dict[str, Any]]:
        """Validate and id up to 20 items added to a conversation."""
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise ApiError(400, "Invalid type for 'items': expected an array.", param="items")
        if len(raw) > MAX_ITEMS_PER_CALL:
            raise too_many_items(len(raw))
        items = [normalize_item(entry) for entry in raw]
        for item in items:
            bare = not item.get("id") and not item.get("encrypted_content")
            if item.get("type") == "reasoning" and bare:
                raise invalid_item("item")
        self._check_duplicates(existing, items)
        return [self._register(item) for item in items]

    def create_conversation(self, items: Any = None, metadata: Any = None) -> Conversation:
        """A new conversation with optional initial items."""
        new = self.new_items(items)
        conversation = Conversation(
            id=self.ids.mint("conv"), metadata=dict(metadata or {}), items=new
        )
        self.conversations[conversation.id] = conversation
        return conversation

    # -- responses ----------------------------------------------------------------------------

    def prepare(self, body: Mapping[str, Any]) -> PreparedRequest:
        """Validate a ``POST /responses`` body, as the real service does, and assign ids."""
        previous_id = body.get("previous_response_id")
        conversation_id = _conversation_id(body.get("conversation"))
        if previous_id is not None and conversation_id is not None:
            raise ApiError(
                400,
                "Mutually exclusive parameters. Ensure you are only providing one of: "
                "'previous_response_id' or 'conversation'.",
                code="mutually_exclusive_parameters",
            )
        history: list[dict[str, Any]] = []
        if previous_id is not None:
            history = self.previous_context(str(previous_id))
        elif conversation_id is not None:
            history = copy.deepcopy(self.conversation(conversation_id).items)
        items = [self._resolve_reference(item) for item in normalize_input(body.get("input"))]
        self._check_duplicates(history, items)
        model = str(body.get("model") or self._model)
        include = body.get("include") or []
        if self._reasoning_rules:
            check_include(body, reasons=self._reasoning is True or is_reasoning_model(model))
            held = set(self.items) | {str(i.get("id")) for i in history if i.get("id")}
            check_reasoning_input(history, items, reasoning_of=self.reasoning_of, held=held)
        self._check_tool_pairs(history + items)
        reasoning = is_reasoning_model(model) if self._reasoning is None else self._reasoning
        return PreparedRequest(
            body=body,
            response_id=self.ids.mint("resp"),
            history=history,
            input=[self.ids.assign(item) for item in items],
            previous_response_id=None if previous_id is None else str(previous_id),
            conversation_id=conversation_id,
            store=body.get("store") is not False,
            streamed=bool(body.get("stream")),
            reasoning=reasoning,
            include_encrypted=isinstance(include, list) and ENCRYPTED_INCLUDE in include,
        )

    def note_output(self, response_id: str, output: Iterable[Mapping[str, Any]]) -> None:
        """Remember, for each output item produced, the reasoning item it belongs to."""
        reasoning_id: str | None = None
        ids: list[str] = []
        for item in output:
            item_id = str(item["id"])
            ids.append(item_id)
            if item.get("type") == "reasoning":
                reasoning_id = item_id
            elif reasoning_id is not None:
                self.reasoning_of[item_id] = reasoning_id
        self.produced[response_id] = ids

    def forget_response(self, response_id: str) -> None:
        """Drop a stored response and the items it produced (retention, a restart)."""
        del self.responses[response_id]
        for item_id in self.produced.get(response_id, []):
            self.items.pop(item_id, None)

    def commit(
        self,
        prepared: PreparedRequest,
        response: dict[str, Any],
        *,
        to_conversation: bool = True,
    ) -> None:
        """Store a finished response and append its input and output to its conversation."""
        output = [copy.deepcopy(item) for item in response["output"]]
        if prepared.store:
            for item in prepared.input + output:
                self._register(copy.deepcopy(item))
            self.responses[prepared.response_id] = StoredResponse(
                body=copy.deepcopy(response),
                transcript=copy.deepcopy(prepared.history + prepared.input + output),
            )
        conversation = self.conversations.get(prepared.conversation_id or "")
        if to_conversation and conversation is not None:
            conversation.items.extend(copy.deepcopy(prepared.input + output))

    # -- helpers ------------------------------------------------------------------------------

    def _register(self, item: dict[str, Any]) -> dict[str, Any]:
        self.ids.assign(item)
        self.items[str(item["id"])] = copy.deepcopy(item)
        return item

    def _resolve_reference(self, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("type") != "item_reference":
            return item
        stored = self.items.get(str(item.get("id")))
        if stored is None:
            raise ApiError(404, f"Item with id '{item.get('id')}' not found.", param="input")
        return copy.deepcopy(stored)

    @staticmethod
    def _check_duplicates(
        existing: Iterable[Mapping[str, Any]], items: Iterable[Mapping[str, Any]]
    ) -> None:
        seen = {item.get("id") for item in existing if item.get("id")}
        for item in items:
            item_id = item.get("id")
            if not item_id:
                continue
            if item_id in seen:
                raise _duplicate(str(item_id))
            seen.add(item_id)

    def _check_tool_pairs(self, items: list[dict[str, Any]]) -> None:
        calls = [i for i in items if i.get("type") in _CALL_OUTPUT_TYPES]
        call_ids = {(i.get("type"), i.get("call_id")) for i in calls}
        output_ids: set[tuple[Any, Any]] = set()
        for item in items:
            for call_type, output_type in _CALL_OUTPUT_TYPES.items():
                if item.get("type") != output_type:
                    continue
                if (call_type, item.get("call_id")) not in call_ids:
                    raise ApiError(
                        400,
                        "No tool call found for function call output with call_id "
                        f"{item.get('call_id')}.",
                        param="input",
                    )
                output_ids.add((output_type, item.get("call_id")))
        if not self._reject_orphans:
            return
        for call in calls:
            if (_CALL_OUTPUT_TYPES[str(call["type"])], call.get("call_id")) not in output_ids:
                raise ApiError(
                    400,
                    f"No tool output found for function call {call.get('call_id')}.",
                    param="input",
                )
