"""The wrapper's hot-path helpers give exactly what the plain versions give.

``facts`` reads an item's fields once for the ledger's hot path, and ``keys`` reads ``role`` only
when the keys depend on it: both agree with the field-by-field readers on every item shape. A
generated prompt cache key is still a random UUID4.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from agents_state_ext._items import ItemKeys, call_of, facts, field, keys


def reference_keys(item: Any) -> ItemKeys:
    """The keys as read field by field, ``role`` always read."""
    item_id, call_id = field(item, "id"), field(item, "call_id")
    kind, role = field(item, "type"), field(item, "role")
    output = isinstance(kind, str) and kind.endswith("_output")
    return ItemKeys(
        item_id if isinstance(item_id, str) and item_id else None,
        call_id if output and isinstance(call_id, str) else None,
        role is None and not output and (kind == "reasoning" or not item_id),
    )


class Plain:
    """A non-mapping item with attributes only."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _message() -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="hi", annotations=[])],
    )


ITEMS: list[Any] = [
    {"role": "user", "content": "yes"},
    {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    {"type": "function_call", "call_id": "", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "x"},
    {"type": "custom_tool_call_output", "call_id": 7, "output": "x"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "reasoning", "summary": []},
    {"type": "reasoning", "id": "rs_1", "role": "assistant", "summary": []},
    {"type": "web_search_call", "id": "ws_1"},
    {"type": "web_search_call"},
    {"id": "", "type": "message", "role": None},
    {},
    MappingProxyType({"type": "shell_call", "call_id": "call_2"}),
    MappingProxyType({"type": "reasoning", "summary": []}),
    ResponseFunctionToolCall(
        id="fc_1", call_id="call_1", type="function_call", name="f", arguments="{}"
    ),
    ResponseFunctionToolCall(call_id="call_1", type="function_call", name="f", arguments="{}"),
    _message(),
    ResponseReasoningItem(id="rs_1", type="reasoning", summary=[]),
    Plain(type="computer_call", call_id="call_3", role=None),
    Plain(type="reasoning", role="assistant"),
    Plain(type="function_call_output", call_id="call_4", id="fco_1"),
    Plain(id="x", type="message"),
    Plain(),
]


@pytest.mark.parametrize("item", ITEMS, ids=lambda item: type(item).__name__)
def test_facts_reads_what_keys_and_call_of_read(item: Any) -> None:
    found, kind, call = facts(item)
    assert found == keys(item) == reference_keys(item)
    assert isinstance(found, ItemKeys)
    assert kind == field(item, "type")
    assert call == call_of(item)


def test_a_mapping_that_is_not_a_dict_is_read_as_a_mapping() -> None:
    class Items(Mapping[str, Any]):
        def __init__(self, data: dict[str, Any]) -> None:
            self.data = data

        def __getitem__(self, key: str) -> Any:
            return self.data[key]

        def __iter__(self) -> Any:
            return iter(self.data)

        def __len__(self) -> int:
            return len(self.data)

    item = Items({"type": "function_call_output", "call_id": "call_9", "output": "x"})
    assert facts(item) == (ItemKeys(None, "call_9", False), "function_call_output", None)
    assert keys(item) == reference_keys(item)


def test_a_generated_prompt_cache_key_is_a_random_uuid4() -> None:
    from agents_state_ext import ServerConversationTracker

    made = [ServerConversationTracker().prompt_cache_key for _ in range(200)]
    assert len(set(made)) == len(made)
    for key in made:
        prefix, _, digits = key.partition(":")
        assert prefix == "agents-state-ext"
        value = uuid.UUID(hex=digits)
        assert value.hex == digits
        assert value.version == 4
        assert value.variant == uuid.RFC_4122


def test_an_unhashable_type_fails_facts_as_it_fails_call_of() -> None:
    item = {"type": ["function_call"], "call_id": "call_1"}
    assert keys(item) == reference_keys(item)
    with pytest.raises(TypeError):
        call_of(item)
    with pytest.raises(TypeError):
        facts(item)
