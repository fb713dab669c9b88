"""Who may do what: loopback by default, bearer tokens, and each user's conversations their own.

Another user's conversation reads exactly as an unknown one (404) on every route; the tests try
each route in ``ROUTES`` and check that nothing changed and nothing was sent to the model.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from _asgi_client import ASGIClient
from agents import Agent, set_tracing_disabled
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from agents_state_ext.cli import main
from agents_state_ext.server import ROUTES, ServeSettings, create_app, parse_tokens
from agents_state_ext.server.config import is_loopback
from agents_state_ext.stores import InMemoryStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

TOKENS = {"alice": "alice-secret-0001", "bob": "bob-secret-00000002"}


def app_on(mock: MockResponsesAPI, **options: Any) -> Any:
    return create_app(
        store=InMemoryStore(),
        agent=Agent(name="assistant", model=mock.model()),
        chat_options={"counter": FixedTokenCounter()},
        **options,
    )


def bearer(user: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[user]}"}


async def alice_chat(client: ASGIClient) -> tuple[str, dict[str, Any]]:
    """A conversation of alice's with one answer; its id and the answer's record."""
    status, created = await client.post("/api/conversations", {"system": "be brief"})
    assert status == 201
    cid = created["id"]
    response = await client.open("POST", f"/api/conversations/{cid}/messages", {"content": "hi"})
    events = await asyncio.wait_for(response.all_events(), 60)
    assert events[-1][0] == "record"
    return cid, events[-1][1]


def every_route(cid: str, record: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Each conversation route of ``ROUTES``, filled in for conversation ``cid``."""
    bodies = {
        "messages": {"content": "let me in"},
        "retry": {},
        "edit": {"user_id": record["parent_user_id"], "content": "mine now"},
        "resume": {},
        "approvals": {"decision": "approved"},
        "stop": None,
        "switch": {"node_id": record["message_id"]},
        "budget": {"budget": 1000},
    }
    calls = []
    for method, path, _ in ROUTES:
        if "{conversation_id}" not in path:
            continue
        url = path.format(conversation_id=cid, ref=record["attempt_id"])
        if url.endswith("/explain"):
            url += f"?a={record['attempt_id']}&b={record['attempt_id']}"
        body = bodies.get(url.rsplit("/", 1)[1]) if method == "POST" else None
        calls.append((method, url, body))
    return calls


async def assert_hidden(
    intruder: ASGIClient,
    owner: ASGIClient,
    mock: MockResponsesAPI,
    cid: str,
    record: dict[str, Any],
) -> None:
    """Every route answers the intruder as for an unknown id; nothing changes, nothing is sent."""
    before = await owner.get(f"/api/conversations/{cid}/export")
    sent = len(mock.requests)
    calls = every_route(cid, record)
    assert len(calls) == len([r for r in ROUTES if "{conversation_id}" in r[1]]) == 16
    for method, url, body in calls:
        status, answer = await intruder.request(method, url, body)
        unknown_status, unknown = await intruder.request(
            method, url.replace(cid, "chat_unknown"), body
        )
        assert (status, unknown_status) == (404, 404), (method, url, answer)
        assert answer["error"]["type"] == unknown["error"]["type"] == "ConversationNotFoundError"
        assert (
            answer["error"]["message"].replace(cid, "chat_unknown") == unknown["error"]["message"]
        )
    listed = (await intruder.get("/api/conversations"))[1]["conversations"]
    assert cid not in [c["id"] for c in listed]
    assert await owner.get(f"/api/conversations/{cid}/export") == before
    assert len(mock.requests) == sent


async def test_without_tokens_the_user_is_the_header_and_users_are_isolated(
    mock: MockResponsesAPI,
) -> None:
    app = app_on(mock)
    alice = ASGIClient(app, {"x-user-id": "alice"})
    bob = ASGIClient(app, {"x-user-id": "bob"})
    anonymous = ASGIClient(app)
    cid, record = await alice_chat(alice)
    await assert_hidden(bob, alice, mock, cid, record)
    await assert_hidden(anonymous, alice, mock, cid, record)  # the default user is "local"
    assert [c["id"] for c in (await alice.get("/api/conversations"))[1]["conversations"]] == [cid]
    status, error = await ASGIClient(app, {"x-user-id": "not a user!"}).get("/api/conversations")
    assert status == 400 and "X-User-Id" in error["error"]["message"]
    await app.state.chat_server.aclose()


async def test_with_tokens_every_request_needs_one(mock: MockResponsesAPI) -> None:
    app = app_on(mock, tokens=TOKENS)
    cid, _ = await alice_chat(ASGIClient(app, bearer("alice")))
    for headers in (
        {},
        {"authorization": "Bearer wrong-secret"},
        {"authorization": f"Basic {TOKENS['alice']}"},
        {"authorization": "Bearer "},
        {"x-user-id": "alice"},
    ):
        client = ASGIClient(app, headers)
        for method, url in (
            ("GET", "/api/conversations"),
            ("POST", "/api/conversations"),
            ("GET", f"/api/conversations/{cid}"),
            ("POST", f"/api/conversations/{cid}/stop"),
        ):
            response = await client.open(method, url)
            assert response.status == 401, (headers, url)
            assert response.headers["www-authenticate"] == "Bearer"
            assert (await response.json())["error"]["type"] == "Unauthorized"
    assert (await ASGIClient(app, bearer("alice")).get(f"/api/conversations/{cid}"))[0] == 200
    await app.state.chat_server.aclose()


async def test_with_tokens_one_user_never_reaches_another_users_conversation(
    mock: MockResponsesAPI,
) -> None:
    app = app_on(mock, tokens=TOKENS)
    alice = ASGIClient(app, bearer("alice"))
    bob = ASGIClient(app, bearer("bob"))
    cid, record = await alice_chat(alice)
    await assert_hidden(bob, alice, mock, cid, record)
    # a header claiming another user is ignored when a token says who you are
    forged = ASGIClient(app, {**bearer("bob"), "x-user-id": "alice"})
    await assert_hidden(forged, alice, mock, cid, record)
    status, created = await forged.post("/api/conversations", {})
    assert status == 201
    assert [c["id"] for c in (await bob.get("/api/conversations"))[1]["conversations"]] == [
        created["id"]
    ]
    assert created["id"] not in [
        c["id"] for c in (await alice.get("/api/conversations"))[1]["conversations"]
    ]
    await app.state.chat_server.aclose()


async def test_another_user_cannot_stop_a_streaming_answer(mock: MockResponsesAPI) -> None:
    app = app_on(mock, tokens=TOKENS)
    alice = ASGIClient(app, bearer("alice"))
    bob = ASGIClient(app, bearer("bob"))
    cid = (await alice.post("/api/conversations", {}))[1]["id"]
    reached, release = asyncio.Event(), asyncio.Event()

    async def hold(request: Any, sent: int) -> None:
        if sent == 3 and not release.is_set():
            reached.set()
            await release.wait()

    mock.frame_hook = hold
    mock.enqueue(Reply.text("one two three four", chunks=["one ", "two ", "three ", "four"]))
    streaming = await alice.open("POST", f"/api/conversations/{cid}/messages", {"content": "go"})
    await asyncio.wait_for(reached.wait(), 60)
    assert (await bob.post(f"/api/conversations/{cid}/stop"))[0] == 404
    release.set()
    events = await asyncio.wait_for(streaming.all_events(), 60)
    assert events[-1][1]["status"] == "complete"
    assert "".join(d["text"] for n, d in events if n == "delta") == "one two three four"
    await app.state.chat_server.aclose()


async def test_mounted_in_your_app_with_your_own_authentication(mock: MockResponsesAPI) -> None:
    def identify(request: Request) -> str | None:
        return request.headers.get("x-session-user")  # stands for your session middleware

    chat_app = app_on(mock, identify=identify)
    outer = Starlette(routes=[Mount("/chat", app=chat_app)])
    carol = ASGIClient(outer, {"x-session-user": "carol"})
    status, created = await carol.post("/chat/api/conversations", {})
    assert status == 201
    response = await carol.open(
        "POST", f"/chat/api/conversations/{created['id']}/messages", {"content": "hello"}
    )
    assert (await asyncio.wait_for(response.all_events(), 60))[-1][1]["status"] == "complete"
    assert (await ASGIClient(outer).get("/chat/api/conversations"))[0] == 401
    dave = ASGIClient(outer, {"x-session-user": "dave"})
    assert (await dave.get(f"/chat/api/conversations/{created['id']}"))[0] == 404
    await chat_app.state.chat_server.aclose()


# -- serve's defaults and refusals -----------------------------------------------------------


def test_serve_listens_on_loopback_by_default_and_refuses_more_without_tokens() -> None:
    settings = ServeSettings()
    assert (settings.host, settings.tokens) == ("127.0.0.1", {})
    assert settings.check() is settings
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.com"):
        assert not is_loopback(host)
        with pytest.raises(ValueError, match="without --token"):
            ServeSettings(host=host).check()
        ServeSettings(host=host, tokens={"alice": "a-long-enough-secret"}).check()
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--host", "0.0.0.0"], "without --token"),
        (["--workers", "2"], "needs --redis"),
        (["--workers", "2", "--redis", "redis://127.0.0.1:1/0", "--store", "memory:"], "shared"),
        (["--workers", "0"], "at least 1"),
        (["--token", "alice"], "USER=SECRET"),
        (["--token", "a=same", "--token", "b=same"], "same token"),
        (["--token", "bad user=x"], "user id"),
    ],
)
def test_serve_refuses_unsafe_or_malformed_options_in_one_line(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, ["serve", *args], env={"OPENAI_API_KEY": ""})
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_tokens_come_from_the_options_or_the_environment() -> None:
    assert parse_tokens("alice=s1, bob=s2") == {"alice": "s1", "bob": "s2"}
    assert parse_tokens(["alice=s1"]) == {"alice": "s1"}
    settings = ServeSettings.from_env({"AGENTS_STATE_EXT_TOKENS": "alice=s1,bob=s2"})
    assert settings.tokens == {"alice": "s1", "bob": "s2"}
    assert ServeSettings.from_env(settings.to_env()).tokens == settings.tokens
    with pytest.raises(ValueError) as raised:
        parse_tokens("alice=")
    assert "alice=***" in str(raised.value)
    assert "s1" not in repr(settings)


def test_serve_takes_the_body_limits_as_options_or_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uvicorn

    monkeypatch.setattr(os, "environ", dict(os.environ))  # what serve exports stays here
    started: list[dict[str, str]] = []  # each start: what its workers read from the environment

    def run(*args: Any, **kwargs: Any) -> None:
        started.append({k: v for k, v in os.environ.items() if k.startswith("AGENTS_STATE_EXT_")})

    monkeypatch.setattr(uvicorn, "run", run)
    env = {"OPENAI_API_KEY": "", "AGENTS_STATE_EXT_STORE": "memory:"}

    def serve(*args: str, **more: str | None) -> Any:
        return CliRunner().invoke(main, ["serve", *args], env={**env, **more})

    unset = {"AGENTS_STATE_EXT_BODY_TIMEOUT": None, "AGENTS_STATE_EXT_MAX_MESSAGE": None}
    given = {"AGENTS_STATE_EXT_BODY_TIMEOUT": "7", "AGENTS_STATE_EXT_MAX_MESSAGE": "4096"}
    assert serve("--body-timeout", "2.5", "--max-message-bytes", "1048576", **unset).exit_code == 0
    assert serve(**unset).exit_code == 0
    assert serve(**given).exit_code == 0
    assert serve("--max-message-bytes", "2048", **given).exit_code == 0  # the option wins
    limits = [
        (w["AGENTS_STATE_EXT_BODY_TIMEOUT"], w["AGENTS_STATE_EXT_MAX_MESSAGE"]) for w in started
    ]
    assert limits == [("2.5", "1048576"), ("30.0", "262144"), ("7.0", "4096"), ("7.0", "2048")]
    settings = ServeSettings.from_env(started[0])
    assert (settings.body_timeout, settings.max_message_bytes) == (2.5, 1048576)
    for args in (["--body-timeout", "0"], ["--max-message-bytes", "0"]):
        result = serve(*args, **unset)
        assert result.exit_code != 0 and "must be positive" in result.stderr, result.output
        assert "Traceback" not in result.output
