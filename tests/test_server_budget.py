"""The served app refuses a message over the token budget with a typed 422, storing nothing.

A send, an edit or a retry over the budget answers 422 before any stream starts, with the
counts in the body; the conversation's export is unchanged and no request reached the model.
``POST …/budget`` is the way on: with a larger budget the same message goes out once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _asgi_client import ASGIClient
from agents import Agent, set_tracing_disabled

from agents_state_ext import InMemoryStore
from agents_state_ext.server import create_app
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

STRATEGIES = ("replay", "session", "previous_response", "conversation")
LONG = " ".join(f"word{i}" for i in range(30))  # 31 tokens with its role (word counts)
SYSTEM = 3  # "system be brief"


@pytest.fixture
async def served() -> AsyncIterator[tuple[ASGIClient, MockResponsesAPI]]:
    async with MockResponsesAPI() as mock:
        app = create_app(
            store=InMemoryStore(),
            agent=Agent(name="assistant", model=mock.model()),
            chat_options={"counter": FixedTokenCounter()},
        )
        try:
            yield ASGIClient(app), mock
        finally:
            await app.state.chat_server.aclose()


async def answered(client: ASGIClient, cid: str, action: str, body: Any) -> list[Any]:
    response = await client.open("POST", f"/api/conversations/{cid}/{action}", body)
    assert response.status == 200, await response.body()
    events = await response.all_events()
    assert events[-1][0] == "record", events
    return list(events)


async def refused(
    client: ASGIClient, mock: MockResponsesAPI, cid: str, action: str, body: Any
) -> dict[str, Any]:
    """``action`` twice: 422 each time, nothing stored, nothing sent; the error body."""
    _, before = await client.get(f"/api/conversations/{cid}/export")
    sent = len(mock.requests)
    errors = []
    for _ in range(2):
        response = await client.open("POST", f"/api/conversations/{cid}/{action}", body)
        assert response.status == 422
        assert response.headers["content-type"].startswith("application/json")
        errors.append((await response.json())["error"])
        assert len(mock.requests) == sent
        assert (await client.get(f"/api/conversations/{cid}/export"))[1] == before
    assert errors[0] == errors[1]
    return dict(errors[0])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("streamed", [False, True])
async def test_over_the_budget_is_a_typed_422_storing_nothing_and_the_budget_route_is_the_way_on(
    served: tuple[ASGIClient, MockResponsesAPI], strategy: str, streamed: bool
) -> None:
    client, mock = served
    status, created = await client.post(
        "/api/conversations", {"system": "be brief", "strategy": strategy, "budget": 20}
    )
    assert status == 201, created
    cid = created["id"]
    first = await answered(client, cid, "messages", {"content": "hi", "stream": streamed})
    user_id = first[0][1]["user_id"]

    error = await refused(client, mock, cid, "messages", {"content": LONG, "stream": streamed})
    system = 0 if strategy == "previous_response" else SYSTEM  # the server holds it there
    assert error == {
        "type": "ContextOverflowError",
        "message": error["message"],
        "required_tokens": system + 31,
        "message_tokens": 31,
        "budget": 20,
    }
    assert "over the budget of 20" in error["message"]
    edit = {"user_id": user_id, "content": LONG, "stream": streamed}
    assert (await refused(client, mock, cid, "edit", edit))["message_tokens"] == 31

    assert (await client.post(f"/api/conversations/{cid}/budget", {"budget": 2}))[0] == 200
    retried = await refused(client, mock, cid, "retry", {"stream": streamed})
    assert (retried["required_tokens"], retried["budget"]) == (SYSTEM + 2, 2)  # "user hi"

    raised = await client.post(f"/api/conversations/{cid}/budget", {"budget": 100})
    assert raised == (200, {"id": cid, "budget": 100})
    assert (await client.get(f"/api/conversations/{cid}"))[1]["budget"] == 100
    await answered(client, cid, "messages", {"content": LONG, "stream": streamed})
    _, tree = await client.get(f"/api/conversations/{cid}/export")
    users = [n for n in tree["nodes"] if n["role"] == "user"]
    assert [n["items"][0]["content"] for n in users] == ["hi", LONG]
    assert [r["status"] for r in tree["attempts"]] == ["complete", "complete"]
    assert sum(LONG in str(body) for body in mock.response_requests) == 1


@pytest.mark.parametrize("budget", [0, -1, "lots", 2.5])
async def test_the_budget_route_refuses_a_bad_budget(
    served: tuple[ASGIClient, MockResponsesAPI], budget: Any
) -> None:
    client, _ = served
    _, created = await client.post("/api/conversations", {"budget": 20})
    status, body = await client.post(
        f"/api/conversations/{created['id']}/budget", {"budget": budget}
    )
    assert (status, body["error"]["type"]) == (400, "ValueError")
    assert (await client.get(f"/api/conversations/{created['id']}"))[1]["budget"] == 20
