"""A chat selects each request from its graph: the same messages and records as ever.

The chat layer builds every request with ``select_context(chat.graph, user_id=...)`` and the
chat's own ``ContextIndex`` (issue 14): a build reads the graph's live active path instead of
a copy of it. What it selects must not change. Each attempt of a seeded run of sends, stops,
retries, edits, switches and budget changes is checked against a fresh selection of the
attempt's branch as a list (no index, a fresh counter): the request on the wire, and the
record's ``included``, ``used`` and ``overflow``.

The store side: a chat hands the store one copy of each changed node, which the store encodes
as it is; the stored text must be, byte for byte, what ``encode(deepcopy(node).to_dict())``
wrote before.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool, set_tracing_disabled

from agents_state_ext import (
    ContextOverflowError,
    InMemoryStore,
    SQLiteStore,
    open_conversation,
    select_context,
)
from agents_state_ext.chat import Attempt, Conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

set_tracing_disabled(True)
pytestmark = pytest.mark.anyio

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
SLOW = "one two three four five six seven eight"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def texts(items: list[dict[str, Any]]) -> list[str]:
    """``role:text`` for messages and ``type:call_id`` for tool items."""
    out = []
    for item in items:
        kind = item.get("type", "message")
        if kind != "message":
            out.append(f"{kind}:{item.get('call_id')}")
            continue
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(str(part.get("text", "")) for part in content)
        out.append(f"{item.get('role')}:{content}")
    return out


def bodies(mock: MockResponsesAPI) -> list[dict[str, Any]]:
    return list(mock.response_requests)


async def check_attempt(
    chat: Conversation, mock: MockResponsesAPI, attempt: Attempt, sent_before: int
) -> None:
    """The attempt's request and record are a fresh selection of its branch."""
    record = await chat.record(attempt.id)
    assert record.parent_user_id is not None
    budget = sys.maxsize if record.budget is None else record.budget
    expected = select_context(
        chat.graph.path_to(record.parent_user_id), budget=budget, counter=FixedTokenCounter()
    )
    assert list(record.included.items()) == [(n.id, expected.tokens[n.id]) for n in expected.nodes]
    assert (record.used, record.overflow) == (expected.used, expected.overflow)
    new = bodies(mock)[sent_before:]
    if expected.overflow:
        assert new == []  # an overflowing request is never sent
        return
    assert new, "the attempt sent nothing"
    assert texts(new[0]["input"]) == texts(expected.items)


async def finish(attempt: Attempt) -> None:
    """Wait for the attempt."""
    await attempt


async def stop_midway(attempt: Attempt, *, streamed: bool) -> None:
    if streamed:
        async for _ in attempt:
            break
    else:
        await asyncio.sleep(0.05)
    await attempt.stop()
    await finish(attempt)


def phrase(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


KINDS = ("send", "tool", "stop", "retry", "edit", "switch", "budget", "overflow")


async def one_step(
    chat: Conversation, mock: MockResponsesAPI, rng: random.Random, kind: str, streamed: bool
) -> Attempt | None:
    """One action of a person at a chat; the attempt it started, if any."""
    users = [n for n in chat.active_path() if n.role == "user"]
    if kind == "budget":
        await chat.set_budget(rng.choice([None, 15, 30, 60]))
        return None
    if kind == "switch":
        ends = [
            n
            for n in chat.graph.nodes()
            if n.role == "assistant" and n.status in ("complete", "cancelled", "failed")
        ]
        await chat.switch(rng.choice(ends).id)
        return None
    if kind == "stop":
        mock.enqueue(
            Reply.text(SLOW, chunks=[w + " " for w in SLOW.split()[:-1]] + ["eight"], delay=0.02)
            if streamed
            else Reply.text(SLOW, delay=1.0)
        )
        attempt = chat.send(phrase(rng), stream=streamed)
        await stop_midway(attempt, streamed=streamed)
        return attempt
    if kind == "overflow":
        kept = chat.budget
        await chat.set_budget(2)  # below the system message and any prompt
        before, sent = chat.graph.to_dict(), len(bodies(mock))
        with pytest.raises(ContextOverflowError):  # refused at once: nothing added or sent
            chat.send(phrase(rng), stream=streamed)
        assert (chat.graph.to_dict(), len(bodies(mock))) == (before, sent)
        await chat.set_budget(kept)
        return None
    if kind == "tool":
        mock.enqueue(Reply.tool_call("get_weather", {"city": rng.choice(WORDS)}))
    mock.enqueue(Reply.text(phrase(rng)))
    if kind == "retry":
        attempt = chat.retry(rng.choice(users).id, stream=streamed)
    elif kind == "edit":
        attempt = chat.edit(rng.choice(users).id, phrase(rng), stream=streamed)
    else:
        attempt = chat.send(phrase(rng), stream=streamed)
    await finish(attempt)
    return attempt


@pytest.mark.parametrize("strategy", ["replay", "session"])
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("seed", [1, 2])
async def test_each_attempt_sends_and_records_a_fresh_selection_of_its_branch(
    strategy: str, streamed: bool, seed: int
) -> None:
    rng = random.Random(seed)
    async with MockResponsesAPI() as mock:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[get_weather])
        chat = await open_conversation(
            InMemoryStore(),
            strategy=strategy,  # type: ignore[arg-type]
            agent=agent,
            counter=FixedTokenCounter(),
            system="be brief",
            budget=30,
        )
        mock.enqueue(Reply.text("hello there"))
        first = chat.send("hi", stream=streamed)
        await finish(first)
        await check_attempt(chat, mock, first, 0)
        # Every kind of action once, in a random order, then 24 more at random.
        kinds = [*rng.sample(KINDS, len(KINDS)), *rng.choices(KINDS, k=24)]
        for kind in kinds:
            sent_before = len(bodies(mock))
            attempt = await one_step(chat, mock, rng, kind, streamed)
            if attempt is not None:
                await check_attempt(chat, mock, attempt, sent_before)
                record = await chat.record(attempt.id)
                assert record.overflow is False


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_a_reseeded_attempt_sends_the_fresh_selection_of_its_branch(streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
        chat = await open_conversation(
            InMemoryStore(),
            strategy="previous_response",
            agent=agent,
            counter=FixedTokenCounter(),
            system="be brief",
            budget=14,
        )
        for reply in ("a b c", "d e f", "g h"):
            mock.enqueue(Reply.text(reply))
            await chat.send(f"question {reply}", stream=streamed)
        mock.expire_response()  # the server lost every response: the chain is gone
        mock.enqueue(Reply.text("again"))
        sent_before = len(bodies(mock))
        attempt = chat.send("and now?", stream=streamed)
        await attempt
        record = await chat.record(attempt.id)
        assert record.reseeded_from is not None
        # The failed request on the lost chain, then the re-seeded one.
        assert bodies(mock)[sent_before].get("previous_response_id") == record.reseeded_from
        await check_attempt(chat, mock, attempt, sent_before + 1)
        # 14 tokens: system 3 + prompt 3 leave 8: the newest turn (3 + 4) only.
        assert texts(bodies(mock)[-1]["input"]) == [
            "system:be brief",
            "user:question g h",
            "assistant:g h",
            "user:and now?",
        ]


def old_encoding(node: Any) -> str:
    """The stored text as the store wrote it before: a deep copy, then ``to_dict()``'s copy."""
    data = copy.deepcopy(node).to_dict()
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_stored_nodes_are_byte_identical_to_the_previous_encoding(
    tmp_path: Path, streamed: bool
) -> None:
    path = tmp_path / "chat.db"
    async with MockResponsesAPI() as mock, SQLiteStore(path) as store:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[get_weather])
        chat = await open_conversation(
            store, strategy="replay", agent=agent, counter=FixedTokenCounter(), system="sé bref ✓"
        )
        mock.enqueue(Reply.tool_call("get_weather", {"city": "Zürich"}), Reply.text("Sonnig ☀"))
        first = await chat.send("Wie ist das Wetter in Zürich?", stream=streamed)
        mock.enqueue(Reply.text("東京は晴れです"))
        await chat.send("Und in Tokio? 東京", stream=streamed)
        mock.enqueue(
            Reply.text(SLOW, chunks=[w + " " for w in SLOW.split()[:-1]] + ["eight"], delay=0.02)
            if streamed
            else Reply.text(SLOW, delay=1.0)
        )
        await stop_midway(chat.send("Und morgen?", stream=streamed), streamed=streamed)
        mock.enqueue(Reply.text("edited answer"))
        await chat.edit(first.user_id, "And in Paris?", stream=streamed)
        nodes = {n.id: n for n in chat.graph.nodes()}
        tools = [n for n in nodes.values() if any("call_id" in i for i in n.items)]
        assert tools and all(n.meta.get("response_id") for n in tools)
        assert any(n.meta.get("invalidated_by") for n in nodes.values())
        assert any(n.meta.get("status_before_invalid") == "cancelled" for n in nodes.values())

        with sqlite3.connect(path) as db:
            stored = dict(
                db.execute("SELECT id, data FROM nodes WHERE conversation_id = ?", (chat.id,))
            )
        assert stored.keys() == nodes.keys()
        for node_id, text in stored.items():
            assert text == old_encoding(nodes[node_id]), node_id

        reopened = await open_conversation(store, chat.id, create=False)
        assert [n.to_dict() for n in reopened.graph.nodes()] == [
            n.to_dict() for n in nodes.values()
        ]
