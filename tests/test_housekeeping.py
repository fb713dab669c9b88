"""Deleting a conversation: the store's copy, and on request what it created on the server."""

from __future__ import annotations

import itertools
from typing import Any

import httpx2
import openai
import pytest

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._housekeeping import DeleteReport, delete_conversation, server_objects
from agents_state_ext.chat.forks import ServerConversations
from agents_state_ext.errors import ConversationNotFoundError
from agents_state_ext.stores import InMemoryStore
from agents_state_ext.testing import MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio


async def stored_chat(
    store: InMemoryStore,
    conversation_id: str,
    response_ids: list[str],
    *,
    servers: ServerConversations | None = None,
    strategy: str = "previous_response",
) -> None:
    """A stored chat whose assistant nodes (and their attempt records) name ``response_ids``.

    The last response id is on an attempt record only, as for a cancelled attempt whose
    response the server still stored.
    """
    counter = itertools.count(1)
    graph = ConversationGraph(conversation_id, id_factory=lambda p: f"{p}{next(counter)}")
    meta = {"server_conversations": (servers or ServerConversations()).to_dict()}
    await store.create_conversation(conversation_id, strategy=strategy, meta=meta)
    records = []
    for number, response_id in enumerate(response_ids, 1):
        user = graph.add_user(f"question {number}")
        node = graph.start_attempt()
        last = number == len(response_ids)
        if last:
            graph.stop(node.id)
        else:
            graph.complete(node.id, meta={"response_id": response_id})
        records.append(
            AttemptRecord(
                node.id,
                str(node.attempt_id),
                user.id,
                response_id=response_id,
                status="cancelled" if last else "complete",
                started_at=float(number),
            )
        )
        if last:
            graph.switch(user.id)
    await store.commit(
        conversation_id,
        graph.take_changes(),
        expected_head=None,
        new_head=graph.active_leaf,
        attempts=records,
    )


async def chain(mock: MockResponsesAPI, count: int, **kwargs: Any) -> list[str]:
    client = mock.client()
    ids: list[str] = []
    for number in range(count):
        mock.enqueue(Reply.text(f"answer {number}"))
        previous = {"previous_response_id": ids[-1]} if ids and not kwargs else {}
        response = await client.responses.create(
            model="gpt-4.1", input=f"question {number}", **previous, **kwargs
        )
        ids.append(response.id)
    return ids


def deletes(mock: MockResponsesAPI) -> list[tuple[str, int | None]]:
    return [(r.path, r.status) for r in mock.requests if r.method == "DELETE"]


async def test_without_a_client_only_the_store_forgets(mock: MockResponsesAPI) -> None:
    store = InMemoryStore()
    ids = await chain(mock, 2)
    await stored_chat(store, "chat_1", ids)
    report = await delete_conversation(store, "chat_1")
    assert report == DeleteReport("chat_1")
    assert await store.list_conversations() == []
    assert mock.response_ids == ids  # nothing was asked of the server
    assert deletes(mock) == []


async def test_previous_response_chat_deletes_every_stored_response(
    mock: MockResponsesAPI,
) -> None:
    store = InMemoryStore()
    ids = await chain(mock, 3)
    await stored_chat(store, "chat_1", ids)
    await stored_chat(store, "other", ["resp_other"])
    report = await delete_conversation(store, "chat_1", client=mock.client())

    assert report.responses_deleted == ids
    assert report.responses_gone == report.conversations_deleted == []
    assert deletes(mock) == [(f"/responses/{i}", 200) for i in ids]
    assert mock.response_ids == []
    assert await store.list_conversations() == ["other"]
    with pytest.raises(ConversationNotFoundError):
        await store.get_conversation("chat_1")
    # a deleted response can no longer carry a chain, as an unknown one
    with pytest.raises(openai.BadRequestError) as info:
        await mock.client().responses.create(
            model="gpt-4.1", input="more", previous_response_id=ids[-1]
        )
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "previous_response_not_found"


async def test_responses_already_gone_are_reported_not_raised(mock: MockResponsesAPI) -> None:
    store = InMemoryStore()
    ids = await chain(mock, 3)
    mock.expire_response(ids[1])
    await stored_chat(store, "chat_1", ids)
    report = await delete_conversation(store, "chat_1", client=mock.client())
    assert report.responses_deleted == [ids[0], ids[2]]
    assert report.responses_gone == [ids[1]]
    assert (f"/responses/{ids[1]}", 404) in deletes(mock)
    assert await store.list_conversations() == []


async def test_conversation_chat_deletes_the_server_conversations_it_created(
    mock: MockResponsesAPI,
) -> None:
    client = mock.client()
    own = [(await client.conversations.create()).id for _ in range(3)]
    brought = mock.create_conversation()
    servers = ServerConversations(root=brought)
    servers.add(brought, tip=None, last_item_id=None, system=False)
    for server_id in own:
        servers.add(server_id, tip=None, last_item_id=None)
    ids = await chain(mock, 1, conversation=own[0])
    mock.expire_response(ids[0])  # a response the server no longer keeps
    await client.conversations.delete(own[2])  # deleted by hand already
    store = InMemoryStore()
    await stored_chat(store, "chat_1", ids + ids, servers=servers, strategy="conversation")

    objects = await server_objects(store, "chat_1")
    assert (objects.responses, objects.conversations, objects.brought) == (ids, own, [brought])
    report = await delete_conversation(store, "chat_1", client=client)
    assert report.conversations_deleted == own[:2]
    assert report.conversations_gone == [own[2]]
    assert report.kept_conversations == [brought]
    assert report.responses_gone == ids
    for server_id in own:
        with pytest.raises(KeyError):
            mock.conversation_items(server_id)
    assert mock.conversation_items(brought) == []  # the caller's conversation is kept
    assert f"/conversations/{brought}" not in [path for path, _ in deletes(mock)]
    assert await store.list_conversations() == []


async def test_a_server_error_leaves_the_store_untouched_and_a_rerun_finishes(
    mock: MockResponsesAPI,
) -> None:
    store = InMemoryStore()
    ids = await chain(mock, 3)
    await stored_chat(store, "chat_1", ids)

    async def flaky(request: httpx2.Request) -> httpx2.Response:
        if request.method == "DELETE" and request.url.path.endswith(ids[1]):
            return httpx2.Response(500, json={"error": {"message": "boom", "type": "server"}})
        return await mock.transport.handle_async_request(request)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(flaky)) as http:
        with pytest.raises(openai.InternalServerError):
            await delete_conversation(store, "chat_1", client=mock.client(http_client=http))
    assert await store.list_conversations() == ["chat_1"]
    assert mock.response_ids == ids[1:]

    report = await delete_conversation(store, "chat_1", client=mock.client())
    assert report.responses_gone == [ids[0]]
    assert report.responses_deleted == ids[1:]
    assert mock.response_ids == []
    assert await store.list_conversations() == []


async def test_deleting_an_unknown_conversation_asks_nothing_of_the_server(
    mock: MockResponsesAPI,
) -> None:
    with pytest.raises(ConversationNotFoundError):
        await delete_conversation(InMemoryStore(), "nope", client=mock.client())
    assert mock.requests == []


async def test_everything_under_the_id_goes_with_it() -> None:
    store = InMemoryStore()
    await stored_chat(store, "chat_1", ["resp_1", "resp_2"])
    await store.put_run_state("chat_1", "att1", "{}")
    await store.put_token_counts("chat_1", "o200k_base", {"msg1": 3})
    await store.put_ledger("chat_1", "{}", expected_version=0, holder=None, held_until=None)
    await delete_conversation(store, "chat_1")
    assert await store.get_ledger("chat_1") is None
    await stored_chat(store, "chat_1", ["resp_3"])  # the id is free again, and empty
    assert await store.get_run_state("chat_1", "att1") is None
    assert await store.get_token_counts("chat_1", "o200k_base") == {}


# -- end to end: chats driven through open_conversation ---------------------------------------

STREAMED = pytest.mark.parametrize("streamed", [False, True])


async def open_chat(
    mock: MockResponsesAPI, store: InMemoryStore, strategy: str, **kwargs: Any
) -> Any:
    from agents import Agent, set_tracing_disabled

    from agents_state_ext.chat import open_conversation
    from agents_state_ext.testing import FixedTokenCounter

    set_tracing_disabled(True)
    return await open_conversation(
        store,
        "chat_1",
        strategy=strategy,  # type: ignore[arg-type]
        agent=Agent(name="assistant", model=mock.model("gpt-4.1")),
        counter=FixedTokenCounter(),
        system="be brief",
        **kwargs,
    )


@STREAMED
async def test_a_previous_response_chat_leaves_nothing_on_the_server(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    store = InMemoryStore()
    chat = await open_chat(mock, store, "previous_response")
    first = await chat.send("hi", stream=streamed)
    await chat.send("more", stream=streamed)
    await chat.retry(stream=streamed)
    await chat.switch(first.id)
    await chat.send("other branch", stream=streamed)
    stored = mock.response_ids
    assert len(stored) == 4

    report = await delete_conversation(store, "chat_1", client=mock.client())
    assert sorted(report.responses_deleted) == sorted(stored)
    assert report.responses_gone == report.conversations_deleted == []
    assert mock.response_ids == []
    assert await store.list_conversations() == []


@pytest.mark.parametrize("bring", [True, False], ids=["brought", "created"])
@STREAMED
async def test_a_conversation_chat_deletes_the_conversations_it_created_only(
    mock: MockResponsesAPI, streamed: bool, bring: bool
) -> None:
    store = InMemoryStore()
    brought = mock.create_conversation() if bring else None
    chat = await open_chat(mock, store, "conversation", server_conversation_id=brought)
    first = await chat.send("hi", stream=streamed)
    second = await chat.send("more", stream=streamed)
    await chat.edit(second.user_id, "changed", stream=streamed)  # forks a server conversation
    await chat.switch(first.id)
    await chat.send("other branch", stream=streamed)  # and forks another
    created = [c for c in alive_conversations(mock) if c != brought]
    assert len(created) == (2 if bring else 3)  # the first one too, when none was brought
    stored = mock.response_ids
    assert len(stored) == 4

    report = await delete_conversation(store, "chat_1", client=mock.client())
    assert sorted(report.conversations_deleted) == created
    assert report.kept_conversations == ([brought] if brought else [])
    assert sorted(report.responses_deleted) == sorted(stored)
    assert mock.response_ids == []
    assert alive_conversations(mock) == ([brought] if brought else [])
    assert await store.list_conversations() == []


def alive_conversations(mock: MockResponsesAPI) -> list[str]:
    """The conversations the mock holds (it numbers them conv_1, conv_2, ...)."""
    alive = []
    for number in range(1, 50):
        try:
            mock.conversation_items(f"conv_{number}")
        except KeyError:
            continue
        alive.append(f"conv_{number}")
    return alive
