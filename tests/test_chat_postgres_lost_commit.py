"""A chat whose commit PostgreSQL applied while the handle heard it fail, then a kill again.

Against the test's own PostgreSQL (``tests/_outage.py``, never the machine's service), behind a
proxy that drops the answer to one ``COMMIT``. The start of an attempt reaches the server,
which is SIGKILLed before its answer is back and stays down until the store gives up asking
what became of it (``StoreUnavailableError``: stored or not, nobody can tell). The handle
keeps the attempt ended ``failed`` in memory; its next commit loses the compare-and-set (the
start was stored), and the re-read that stores the failed end over the stored start finds
the server killed once more. Issue 33 (items 0 and 2): that end was dropped, so the store
kept the attempt ``queued`` for good and the same handle refused every later send
(``InvalidTransitionError: attempt … is still queued``); a new handle did the same.

Held here: the handle stays usable (the next send is answered), and a fresh handle reads
every attempt record final and of its node's status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from _outage import FaultProxy, Postgres, postgres_store, proxied, running_postgres
from agents import Agent, set_tracing_disabled

from agents_state_ext import ConcurrentUpdateError, StoreUnavailableError, open_conversation
from agents_state_ext.stores import _postgres_outcome
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI
from soak.fault_checks import disagreements

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

TIMEOUT = 2.0  # the store's statement timeout, in seconds

postgres = pytest.fixture(scope="module", name="postgres")(running_postgres)


class KillBefore:
    """A store that SIGKILLs the server right before the next call of one method, once;
    :attr:`killed` is set once that call has ended."""

    def __init__(self, store: Any, server: Postgres) -> None:
        self._store, self._server = store, server
        self._armed: str | None = None
        self.killed = asyncio.Event()

    def arm(self, method: str) -> None:
        self._armed = method
        self.killed.clear()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name != self._armed:
            return found

        async def killing(*args: Any, **kwargs: Any) -> Any:
            self._armed = None
            self._server.kill()
            try:
                return await found(*args, **kwargs)
            finally:  # the call has failed (the server stays down until the test starts it)
                self.killed.set()

        return killing


@pytest.fixture
async def proxy(postgres: Postgres) -> AsyncIterator[FaultProxy]:
    async for made in proxied(postgres.port):
        yield made


@pytest.fixture
async def store(proxy: FaultProxy) -> AsyncIterator[Any]:
    options = {"max_size": 4, "timeout": TIMEOUT, "statement_timeout": TIMEOUT}
    async for made in postgres_store(proxy, **options):
        yield made


async def bounded(waiting: Awaitable[Any], seconds: float = 30) -> Any:
    return await asyncio.wait_for(waiting, seconds)


async def until_through(action: Callable[[], Awaitable[Any]]) -> Any:
    """``action`` once the store is back: a store error or a lost race (re-read) tries again."""
    for _ in range(100):
        try:
            return await bounded(action())
        except (StoreUnavailableError, ConcurrentUpdateError):
            await asyncio.sleep(0.1)
    raise AssertionError("the store never came back")


@pytest.mark.parametrize("reopen", [False, True], ids=["same handle", "new handle"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_start_stored_though_reported_failed_then_a_kill_leaves_the_chat_usable(
    streamed: bool,
    reopen: bool,
    store: Any,
    proxy: FaultProxy,
    postgres: Postgres,
    mock: MockResponsesAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next touch — the same handle's, or a new handle's on the same store (the user gave
    up on the first) — stores the failed end the first handle kept: the chat goes on."""
    # The store asks the restarted server what became of the cut COMMIT for this long: the
    # server stays down longer, so the outcome is unknown (the default waits 10 s).
    monkeypatch.setattr(_postgres_outcome, "_WAIT", 0.3)
    killing = KillBefore(store, postgres)
    options: dict[str, Any] = {
        "agent": Agent(name="assistant", model=mock.model("gpt-4.1")),
        "counter": FixedTokenCounter(),
    }
    chat = await open_conversation(killing, strategy="replay", system="be brief", **options)
    await bounded(chat.send("one", stream=streamed))

    held = proxy.lose_reply_to(b"COMMIT\x00")
    lost = chat.send("two", stream=streamed)
    await bounded(held.wait())
    postgres.kill()  # the start is stored; its answer never comes back
    with pytest.raises(StoreUnavailableError):
        await bounded(lost)
    assert lost.status == "failed"

    # The server back, the handle stores the failed end over the stored start (its commit
    # loses the race): the re-read it does then finds the server killed again.
    killing.arm("get_head")
    postgres.start()
    await bounded(killing.killed.wait())  # the handle's background try of the end
    postgres.start()
    if reopen:
        chat = await until_through(lambda: open_conversation(killing, chat.id, **options))
    else:
        await until_through(chat.refresh)

    answered = await until_through(lambda: chat.send("three", stream=streamed))
    assert answered.status == "complete"
    users = [n.text() for n in chat.active_path() if n.role == "user"]
    assert users == ["one", "two", "three"]

    fresh = await open_conversation(store, chat.id, **options)
    records = await fresh.attempts()
    assert [r.status for r in records] == ["complete", "failed", "complete"]
    assert records[1].message_id == lost.id
    assert disagreements(fresh.graph.nodes(), records) == {
        "every_attempt_final": [],
        "node_record_agree": [],
    }
    # Nothing of "two" was sent (its start failed): the model was asked for "one" and for
    # "three", the second time with the turn it answered before and no failed one.
    asked = [r.json["input"] for r in mock.requests if r.path == "/responses"]
    assert [[i["content"] for i in items if i.get("role") == "user"] for items in asked] == [
        ["one"],
        ["one", "three"],
    ]
