"""MockResponsesAPI: the Conversations endpoints and responses that use a conversation."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.memory import OpenAIConversationsSession

from agents_state_ext.testing import MockResponsesAPI, Reply, describe_items

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


async def test_create_retrieve_update_delete(mock: MockResponsesAPI) -> None:
    client = mock.client()
    conversation = await client.conversations.create(
        items=[user("a"), user("b")],  # type: ignore[list-item]
        metadata={"k": "v"},
    )
    assert conversation.id == "conv_1"
    assert conversation.object == "conversation"
    assert (await client.conversations.retrieve("conv_1")).metadata == {"k": "v"}
    updated = await client.conversations.update("conv_1", metadata={"k": "w"})
    assert updated.metadata == {"k": "w"}
    assert describe_items(mock.conversation_items("conv_1")) == ["user: a", "user: b"]
    assert [item["id"] for item in mock.conversation_items("conv_1")] == ["msg_1", "msg_2"]
    deleted = await client.conversations.delete("conv_1")
    assert deleted.deleted
    with pytest.raises(openai.NotFoundError, match="Conversation with id 'conv_1' not found"):
        await client.conversations.retrieve("conv_1")


async def test_more_than_20_items_are_rejected(mock: MockResponsesAPI) -> None:
    client = mock.client()
    too_many = [user(str(i)) for i in range(21)]
    with pytest.raises(openai.BadRequestError) as info:
        await client.conversations.create(items=too_many)  # type: ignore[arg-type]
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "array_above_max_length"
    assert info.value.body["message"].startswith("Invalid 'items': array too long.")
    conversation = await client.conversations.create(items=too_many[:20])  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="array too long"):
        await client.conversations.items.create(conversation.id, items=too_many)  # type: ignore[arg-type]
    assert len(mock.conversation_items(conversation.id)) == 20


async def test_add_get_and_delete_items(mock: MockResponsesAPI) -> None:
    client = mock.client()
    conversation_id = mock.create_conversation([user("a")])
    page = await client.conversations.items.create(
        conversation_id,
        items=[user("b"), {"type": "message", "role": "assistant", "content": "c"}],  # type: ignore[list-item]
    )
    assert [item.id for item in page.data] == ["msg_2", "msg_3"]
    assert page.first_id == "msg_2" and page.last_id == "msg_3" and not page.has_more
    item = await client.conversations.items.retrieve("msg_3", conversation_id=conversation_id)
    assert item.model_dump(exclude_none=True)["content"] == [
        {"type": "output_text", "text": "c", "annotations": []}
    ]
    after_delete = await client.conversations.items.delete("msg_2", conversation_id=conversation_id)
    assert after_delete.id == conversation_id
    assert describe_items(mock.conversation_items(conversation_id)) == ["user: a", "assistant: c"]
    with pytest.raises(openai.NotFoundError, match="Item with id 'msg_2' not found"):
        await client.conversations.items.delete("msg_2", conversation_id=conversation_id)
    with pytest.raises(openai.BadRequestError, match="Duplicate item found with id msg_1"):
        await client.conversations.items.create(
            conversation_id,
            items=[{**user("again"), "id": "msg_1"}],  # type: ignore[list-item]
        )


async def test_list_items_pagination(mock: MockResponsesAPI) -> None:
    client = mock.client()
    conversation_id = mock.create_conversation([user(str(i)) for i in range(5)])
    first: Any = await client.conversations.items.list(conversation_id, limit=2, order="asc")
    assert [item.id for item in first.data] == ["msg_1", "msg_2"]
    assert (first.first_id, first.last_id, first.has_more) == ("msg_1", "msg_2", True)
    rest = await client.conversations.items.list(
        conversation_id, limit=10, order="asc", after="msg_2"
    )
    assert [item.id for item in rest.data] == ["msg_3", "msg_4", "msg_5"]
    assert not rest.has_more
    newest = await client.conversations.items.list(conversation_id, limit=2)
    assert [item.id for item in newest.data] == ["msg_5", "msg_4"]
    older = await client.conversations.items.list(conversation_id, limit=2, after="msg_4")
    assert [item.id for item in older.data] == ["msg_3", "msg_2"]
    walked = [item.id async for item in client.conversations.items.list(conversation_id, limit=2)]
    assert walked == ["msg_5", "msg_4", "msg_3", "msg_2", "msg_1"]
    assert [r.params.get("after") for r in mock.requests[-3:]] == [None, "msg_4", "msg_2"]
    with pytest.raises(openai.BadRequestError, match="integer above maximum value"):
        await client.conversations.items.list(conversation_id, limit=101)
    empty: Any = await client.conversations.items.list(mock.create_conversation())
    assert (empty.data, empty.first_id, empty.last_id, empty.has_more) == ([], None, None, False)


@pytest.mark.parametrize("streamed", [False, True])
async def test_response_appends_input_and_output_to_conversation(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    client = mock.client()
    conversation_id = mock.create_conversation([user("earlier")])
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    conversations: list[tuple[str, Any]] = [("a", conversation_id), ("b", {"id": conversation_id})]
    for text, conversation in conversations:
        if streamed:
            stream = await client.responses.create(
                model="gpt-4.1", input=text, conversation=conversation, stream=True
            )
            async for _ in stream:
                pass
        else:
            response = await client.responses.create(
                model="gpt-4.1", input=text, conversation=conversation
            )
            assert response.conversation is not None
            assert response.conversation.id == conversation_id
    items = mock.conversation_items(conversation_id)
    assert describe_items(items) == [
        "user: earlier",
        "user: a",
        "assistant: one",
        "user: b",
        "assistant: two",
    ]
    assert mock.transcript("resp_2") == items


async def test_resending_a_stored_conversation_item_is_a_duplicate(
    mock: MockResponsesAPI,
) -> None:
    client = mock.client()
    conversation_id = mock.create_conversation()
    first = await client.responses.create(model="gpt-4.1", input="a", conversation=conversation_id)
    with pytest.raises(openai.BadRequestError, match="Duplicate item found with id msg_2"):
        await client.responses.create(
            model="gpt-4.1",
            input=[first.output[0].model_dump(exclude_none=True), user("b")],  # type: ignore[list-item]
            conversation=conversation_id,
        )
    assert len(mock.conversation_items(conversation_id)) == 2


async def test_openai_conversations_session_round_trip(mock: MockResponsesAPI) -> None:
    session = OpenAIConversationsSession(openai_client=mock.client())
    agent = Agent(name="a", model=mock.model())
    await Runner.run(agent, "first", session=session)
    result = await Runner.run(agent, "second", session=session)
    assert result.final_output == "echo: second"
    assert (mock.requests[0].method, mock.requests[0].path) == ("POST", "/conversations")
    conversation_id = "conv_1"
    assert describe_items(mock.conversation_items(conversation_id)) == [
        "user: first",
        "assistant: echo: first",
        "user: second",
        "assistant: echo: second",
    ]
    assert [item.get("role") for item in await session.get_items()] == ["user", "assistant"] * 2
    popped = await session.pop_item()
    assert popped is not None
    assert len(mock.conversation_items(conversation_id)) == 3


async def test_a_deleted_conversation_takes_no_more_turns(mock: MockResponsesAPI) -> None:
    client = mock.client()
    conversation = await client.conversations.create(items=[user("a")])  # type: ignore[list-item]
    await client.responses.create(model="gpt-4.1", input="b", conversation=conversation.id)
    deleted = await client.conversations.delete(conversation.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (
        conversation.id,
        "conversation.deleted",
        True,
    )
    with pytest.raises(KeyError):
        mock.conversation_items(conversation.id)
    with pytest.raises(openai.NotFoundError, match=f"Conversation with id '{conversation.id}'"):
        await client.conversations.delete(conversation.id)  # the same 404 again
    with pytest.raises(openai.NotFoundError, match="not found"):
        await client.responses.create(model="gpt-4.1", input="c", conversation=conversation.id)
    assert [r.status for r in mock.requests if r.method == "DELETE"] == [200, 404]
