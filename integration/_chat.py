"""Helpers for the chat-API integration tests: a chat on the mock server, stopping mid-answer."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from agents import Agent

from agents_state_ext import InMemoryStore
from agents_state_ext.chat import Attempt, Conversation, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

SLOW = "one two three four five six seven eight nine ten eleven twelve"


def ids() -> Callable[[str], str]:
    """Readable, deterministic node ids: m1, m2, ...; att1, ...; req1, ..."""
    counters: dict[str, itertools.count[int]] = {}
    short = {"msg": "m", "att": "att", "req": "req"}
    return lambda prefix: f"{short[prefix]}{next(counters.setdefault(prefix, itertools.count(1)))}"


async def open_chat(mock: MockResponsesAPI, strategy: str, **kwargs: Any) -> Conversation:
    """A chat in a fresh in-memory store, with a system message and word-count tokens."""
    store = kwargs.pop("store", None) or InMemoryStore()
    options: dict[str, Any] = {
        "strategy": strategy,
        "agent": Agent(name="assistant", model=mock.model("gpt-4.1")),
        "counter": FixedTokenCounter(),
        "system": "be brief",
        "id_factory": ids(),
        **kwargs,
    }
    return await open_conversation(store, **options)


def slow_reply(*, streamed: bool) -> Reply:
    """A long answer streamed word by word, or held a second when not streamed: stop it midway."""
    words = SLOW.split(" ")
    chunks = [w + " " for w in words[:-1]] + [words[-1]]
    return Reply.text(SLOW, chunks=chunks, delay=0.02 if streamed else 1.0)


async def stop_midway(
    attempt: Attempt, *, streamed: bool, mock: MockResponsesAPI, path: str = "/responses"
) -> Attempt:
    """Stop after two streamed deltas, or while the non-streamed request is in flight (the mock
    holds it, unanswered: waited for, never guessed with a sleep). ``path``: the endpoint the
    agent's model posts to (``/chat/completions`` for a Chat Completions model)."""
    if streamed:
        seen = 0
        async for _ in attempt:
            seen += 1
            if seen == 2:
                break
    else:
        for _ in range(1000):
            posts = [r for r in mock.requests if r.method == "POST" and r.path == path]
            if posts and posts[-1].status is None:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the request never reached the mock")
    await attempt.stop()
    return await attempt
