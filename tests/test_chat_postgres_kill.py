"""Chats driven directly on a PostgreSQL killed (``kill -9``) mid-commit and restarted at once.

Several chats (chat layer, ``PostgresStore``) send, retry and edit concurrently while the
test's own PostgreSQL (``tests/_outage.py``, never the machine's service) is SIGKILLed in the
middle of commits and started again at once. Each kill lands after a ``COMMIT`` reached the
server and before its answer came back (the proxy drops it): stored, though the connection
broke before the handle heard so. A chat that gets a store error does what a user would:
something else, on the same handle or on a new one.

Then each conversation is opened with a fresh handle, which is the next touch of it; what it
reads back must hold: every attempt record final, every assistant node with its record, and
node and record of the same status (an invalid node: its status before the edit).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _outage import FaultProxy, Postgres, postgres_store, proxied, running_postgres
from agents import Agent, set_tracing_disabled

from agents_state_ext import open_conversation
from agents_state_ext.chat import Conversation
from agents_state_ext.errors import StoreError
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI
from soak.fault_checks import disagreements

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

FINAL = ("complete", "cancelled", "failed")
STRATEGIES = ["replay", "previous_response", "session", "conversation"]
TURNS = 4
KILLS = 5


postgres = pytest.fixture(scope="module", name="postgres")(running_postgres)


async def _act(chat: Conversation, rng: random.Random, n: int) -> None:
    """One user action: a new message, an edit of the last one, or a retry of the turn."""
    action = rng.choice(["send", "send", "edit", "retry"])
    stream = rng.random() < 0.5
    path = chat.active_path()
    users = [node for node in path if node.role == "user"]
    if action == "edit" and users:
        await chat.edit(users[-1].id, f"edited {n}", stream=stream)
    elif action == "retry" and users:
        await chat.retry(stream=stream)
    else:
        await chat.send(f"turn {n}", stream=stream)


async def _drive(chat: Conversation, seed: int, options: dict[str, Any]) -> int:
    """``TURNS`` actions that got through. After a store error the user does something else,
    on the same handle or, every other time, on a new one (another tab, another worker)."""
    rng = random.Random(seed)
    done = failed = 0
    while done < TURNS:
        try:
            await _act(chat, rng, done)
        except StoreError:
            failed += 1
            assert failed < 50, f"chat {chat.id}: nothing gets through"
            await asyncio.sleep(0.02)
            if failed % 2 == 0:
                with contextlib.suppress(StoreError):
                    chat = await open_conversation(chat.store, chat.id, **options)
            continue
        done += 1
    return failed


async def _kill_during_commits(postgres: Postgres, proxy: FaultProxy, done: asyncio.Event) -> int:
    """SIGKILL PostgreSQL each time a ``COMMIT`` has reached it, before its answer is back."""
    kills = 0
    while kills < KILLS and not done.is_set():
        held = asyncio.ensure_future(proxy.lose_reply_to(b"COMMIT\x00").wait())
        finished = asyncio.ensure_future(done.wait())
        await asyncio.wait({held, finished}, return_when=asyncio.FIRST_COMPLETED)
        held.cancel()
        finished.cancel()
        if not proxy.held.is_set():
            break
        postgres.kill()
        postgres.start()  # a fast restart: the pooled connections are all dead
        kills += 1
        await asyncio.sleep(0.1)
    proxy.lose_reply_to(b"\x00never")
    return kills


@pytest.fixture
async def proxy(postgres: Postgres) -> AsyncIterator[FaultProxy]:
    async for made in proxied(postgres.port):
        yield made


@pytest.fixture
async def store(proxy: FaultProxy) -> AsyncIterator[Any]:
    options = {"max_size": 8, "timeout": 5, "statement_timeout": 5}
    async for made in postgres_store(proxy, **options):
        yield made


async def test_after_kills_mid_commit_every_attempt_is_final_and_node_and_record_agree(
    store: Any, proxy: FaultProxy, postgres: Postgres, mock: MockResponsesAPI
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    options: dict[str, Any] = {"agent": agent, "counter": FixedTokenCounter()}
    chats = []
    for strategy in STRATEGIES:
        chat = await open_conversation(
            store,
            strategy=strategy,  # type: ignore[arg-type]
            system="be brief",
            **options,
        )
        await chat.send("hello")
        chats.append(chat)
    done = asyncio.Event()
    killer = asyncio.ensure_future(_kill_during_commits(postgres, proxy, done))
    try:
        driven = asyncio.gather(*(_drive(c, i, options) for i, c in enumerate(chats)))
        await asyncio.wait_for(driven, 120)
    finally:
        done.set()
        kills = await killer
    assert kills > 0  # each after a COMMIT reached the server (what the handles saw may be none)

    found: dict[str, list[str]] = {}
    for chat in chats:
        fresh = await open_conversation(store, chat.id, **options)
        checks = disagreements(fresh.graph.nodes(), await fresh.attempts())
        wrong = [w for found in checks.values() for w in found]
        if wrong:
            found[chat.id] = wrong
    assert not found, found
