"""What a refused request body leaves behind (nothing), and the limits on bodies (issue 28)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from _asgi_client import ASGIClient
from agents import Agent, set_tracing_disabled

from agents_state_ext.errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    FencedOutError,
    StoreError,
    StoreValueError,
)
from agents_state_ext.server import create_app
from agents_state_ext.stores import InMemoryStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

LONE = "a\ud800b"  # json.dumps sends it as the escape "a\\ud800b", which JSON allows


def app_on(mock: MockResponsesAPI, store: InMemoryStore | None = None, **options: Any) -> Any:
    return create_app(
        store=store or InMemoryStore(),
        agent=Agent(name="assistant", model=mock.model()),
        chat_options={"counter": FixedTokenCounter()},
        **options,
    )


async def listing(client: ASGIClient) -> list[str]:
    status, answer = await client.get("/api/conversations")
    assert status == 200
    return [c["id"] for c in answer["conversations"]]


@pytest.mark.parametrize(
    "body",
    [
        {"system": LONE},
        {"strategy": "replay", "system": f"fine, then {LONE}"},
        {"system": "fine", LONE: 1},
        {"system": ["not", "text"]},
        {"budget": -1},
    ],
)
async def test_a_refused_create_stores_nothing(
    mock: MockResponsesAPI, body: dict[str, Any]
) -> None:
    store = InMemoryStore()
    app = app_on(mock, store)
    client = ASGIClient(app, {"x-user-id": "alice"})
    status, answer = await client.post("/api/conversations", body)
    assert status == 400, answer
    assert await store.list_conversations() == []
    assert await listing(client) == []
    assert mock.requests == []
    await app.state.chat_server.aclose()


async def test_a_lone_surrogate_in_a_message_is_refused_before_anything_is_written(
    mock: MockResponsesAPI,
) -> None:
    app = app_on(mock)
    client = ASGIClient(app, {"x-user-id": "alice"})
    cid = (await client.post("/api/conversations", {}))[1]["id"]
    before = await client.get(f"/api/conversations/{cid}/export")
    for content in (LONE, [{"role": "user", "content": LONE}]):
        status, answer = await client.post(
            f"/api/conversations/{cid}/messages", {"content": content}
        )
        assert status == 400 and "not valid Unicode" in answer["error"]["message"], answer
    assert await client.get(f"/api/conversations/{cid}/export") == before
    assert mock.requests == []
    await app.state.chat_server.aclose()


class OwnerWriteFails(InMemoryStore):
    """A store that refuses the owner's write, the create's last step (stands for a glitch)."""

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        if "owner" in meta:
            raise StoreError("the store refused the write")
        await super().update_conversation_meta(conversation_id, meta)


async def test_a_create_that_fails_after_its_first_write_takes_it_back(
    mock: MockResponsesAPI,
) -> None:
    store = OwnerWriteFails()
    app = app_on(mock, store)
    client = ASGIClient(app, {"x-user-id": "alice"})
    status, answer = await client.post("/api/conversations", {"system": "be brief"})
    # the store failed, not the client: a 5xx, typed, without the store's own text
    assert status == 500, answer
    assert answer["error"] == {
        "type": "StoreError",
        "message": "the conversation store could not do what was asked",
    }
    assert await store.list_conversations() == []
    await app.state.chat_server.aclose()


class ReadFails(InMemoryStore):
    """A store whose reads of one conversation raise ``error`` (once the test sets it)."""

    error: Exception | None = None

    async def get_conversation(self, conversation_id: str) -> Any:
        if self.error is not None:
            raise self.error
        return await super().get_conversation(conversation_id)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (StoreError("disk quota exceeded on /var/lib/chats.db"), 500),  # the store's failure
        (ConcurrentUpdateError("another writer moved the head"), 409),
        (FencedOutError("the lease was lost"), 409),
        (ConversationNotFoundError("no conversation 'x'"), 404),
        (StoreValueError("a conversation id cannot hold a NUL character"), 400),
    ],
)
async def test_a_store_error_is_4xx_only_when_the_client_caused_it(
    mock: MockResponsesAPI, error: Exception, status: int
) -> None:
    store = ReadFails()
    app = app_on(mock, store)
    client = ASGIClient(app, {"x-user-id": "alice"})
    cid = (await client.post("/api/conversations", {}))[1]["id"]
    store.error = error
    got, answer = await client.get(f"/api/conversations/{cid}")
    assert got == status, answer
    assert answer["error"]["type"] == type(error).__name__
    if status == 500:  # its text (a path, a host) goes to the log only
        assert "quota" not in answer["error"]["message"]
    await app.state.chat_server.aclose()


async def test_a_conversation_id_no_store_can_keep_is_the_clients_400(
    mock: MockResponsesAPI,
) -> None:
    app = app_on(mock)
    client = ASGIClient(app, {"x-user-id": "alice"})
    status, answer = await client.get("/api/conversations/a%00b")
    assert status in (400, 404), answer
    await app.state.chat_server.aclose()


async def test_a_good_create_still_works(mock: MockResponsesAPI) -> None:
    app = app_on(mock)
    client = ASGIClient(app, {"x-user-id": "alice"})
    status, created = await client.post("/api/conversations", {"system": "be brief ✓"})
    assert status == 201
    assert await listing(client) == [created["id"]]
    response = await client.open(
        "POST", f"/api/conversations/{created['id']}/messages", {"content": "hi ✓"}
    )
    events = await asyncio.wait_for(response.all_events(), 60)
    assert events[-1][0] == "record" and events[-1][1]["status"] == "complete"
    await app.state.chat_server.aclose()
