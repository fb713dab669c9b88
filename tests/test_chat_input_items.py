"""chat.send / chat.edit refuse, up front, input items the Responses API refuses, and accept
every input form it takes; stored nodes are never re-checked when a chat is opened again."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, set_tracing_disabled

from agents_state_ext import MessageContentError
from agents_state_ext.chat import Conversation, open_conversation
from agents_state_ext.stores import InMemoryStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

NEXT = {"role": "user", "content": "and?"}
CALL = {"type": "function_call", "call_id": "call_x", "name": "f", "arguments": "{}"}

REFUSED: dict[str, tuple[list[dict[str, Any]], str]] = {
    "tool role": ([{"role": "tool", "content": "42"}], "role 'tool'"),
    "part as an item": ([{"type": "input_text", "text": "hi"}], "type 'input_text'"),
    "unknown field": ([{"role": "user", "content": "hi", "name": "bob"}], "no field 'name'"),
    "unknown part type": (
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "content part type 'text'",
    ),
    "call id prefix": ([{**CALL, "id": "call_1"}], "does not begin with 'fc'"),
    "arguments object": ([{**CALL, "arguments": {"a": 1}}], "'arguments' is a JSON string"),
}

ACCEPTED: dict[str, list[dict[str, Any]]] = {
    "easy message": [{"role": "user", "content": "hi"}],
    "typed message": [{"type": "message", "role": "user", "content": "hi"}],
    "parts": [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
                {"type": "input_file", "file_id": "file_1"},
            ],
        }
    ],
    "developer": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}],
    "call and output": [
        CALL,
        {"type": "function_call_output", "call_id": "call_x", "output": "42"},
        {"role": "user", "content": "and so?"},
    ],
    "assistant output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "earlier", "annotations": []}],
        },
        {"role": "user", "content": "go on"},
    ],
}


async def chat_on(
    mock: MockResponsesAPI, store: InMemoryStore, chat_id: str | None = None
) -> Conversation:
    return await open_conversation(
        store,
        chat_id,
        strategy="replay",
        agent=Agent(name="a", model=mock.model()),
        counter=FixedTokenCounter(),
    )


@pytest.mark.parametrize("action", ["send", "edit"])
@pytest.mark.parametrize("kind", sorted(REFUSED))
async def test_items_the_api_refuses_are_a_typed_error_before_anything_changes(
    kind: str, action: str
) -> None:
    content, reason = REFUSED[kind]
    store = InMemoryStore()
    async with MockResponsesAPI() as mock:
        chat = await chat_on(mock, store)
        await chat.send("first")
        before = (await store.load_graph(chat.id)).to_dict()
        sent = len(mock.requests)
        user = next(node for node in chat.active_path() if node.role == "user")
        with pytest.raises(MessageContentError, match=f"cannot {action}.*{reason}") as raised:
            if action == "send":
                chat.send(content)
            else:
                chat.edit(user.id, content)
        assert isinstance(raised.value, ValueError)
        assert (await store.load_graph(chat.id)).to_dict() == before
        assert len(mock.requests) == sent


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("kind", sorted(ACCEPTED))
async def test_every_input_form_the_api_takes_reaches_it(kind: str, streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        chat = await chat_on(mock, InMemoryStore())
        attempt = await chat.send(ACCEPTED[kind], stream=streamed)
        assert (attempt.status, attempt.error) == ("complete", None)
        assert [r.status for r in mock.requests] == [200]
        assert mock.response_requests[-1]["input"][-len(ACCEPTED[kind]) :] == ACCEPTED[kind]


async def test_a_reasoning_item_with_encrypted_content_is_taken() -> None:
    async with MockResponsesAPI(model="gpt-5") as mock:
        client = mock.client()
        first = await client.responses.create(
            model="gpt-5", input="think", include=["reasoning.encrypted_content"], store=False
        )
        items = [item.model_dump(exclude_none=True) for item in first.output]
        chat = await chat_on(mock, InMemoryStore())
        assert [item["type"] for item in items] == ["reasoning", "message"]
        assert "encrypted_content" in items[0]
        attempt = await chat.send([{"role": "user", "content": "think"}, *items, NEXT])
        assert (attempt.status, attempt.error) == ("complete", None)
        assert mock.requests[-1].status == 200
        assert mock.response_requests[-1]["input"][1] == items[0]


async def test_stored_part_lists_and_output_items_load_and_go_on() -> None:
    """What a chat stored (content-part lists, the model's output items) is not re-checked."""
    store = InMemoryStore()
    async with MockResponsesAPI() as mock:
        chat = await chat_on(mock, store)
        mock.enqueue(Reply.text("first answer"))
        await chat.send(ACCEPTED["parts"])
        again = await chat_on(mock, store, chat.id)
        attempt = await again.send("and then?")
        assert attempt.error is None
        sent = mock.response_requests[-1]["input"]
        assert sent[0] == ACCEPTED["parts"][0]
        assert sent[1]["content"][0]["text"] == "first answer"
