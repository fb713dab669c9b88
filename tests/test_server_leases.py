"""Conversation leases: one live driver per conversation, takeover after a lapse, fencing, hold."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from _backends import BACKENDS

from agents_state_ext._nodes import Node
from agents_state_ext.errors import ConcurrentUpdateError, FencedOutError, StoreError
from agents_state_ext.server.leases import (
    ConversationBusyError,
    HeldLease,
    Lease,
    LeaseLostError,
    LeaseManager,
    lease_key,
)
from agents_state_ext.stores import ConversationStore, Fence, InMemoryStore, LedgerStore

pytestmark = pytest.mark.anyio

TTL = 0.3  # seconds; hold() renews every TTL / 3 of real time, expiry follows the fake clock
WAIT = 10.0  # a guard against a hang only, never a measured duration


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LedgerStore]:
    made: ConversationStore = await BACKENDS[request.param](tmp_path)()
    assert isinstance(made, LedgerStore)
    yield made
    await made.aclose()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def manager(store: object, worker: str, clock: Clock, ttl: float = 15.0) -> LeaseManager:
    return LeaseManager(store, worker_id=worker, ttl=ttl, clock=clock)


async def wait_until_renewed(leases: LeaseManager, conversation_id: str, after: float) -> Lease:
    """Poll the store until the lease there expires later than ``after`` (a renewal landed)."""
    with anyio.fail_after(WAIT):
        while True:
            live = await leases.holder(conversation_id)
            if live is not None and live.expires_at > after:
                return live
            await anyio.sleep(0.01)


# -- acquire / renew / release ----------------------------------------------------------------


async def test_a_free_conversation_is_acquired_and_seen_as_held(
    store: LedgerStore, clock: Clock
) -> None:
    a = manager(store, "worker-a", clock, ttl=15)
    assert await a.holder("c1") is None

    lease = await a.acquire("c1")

    assert lease == Lease("c1", "worker-a", lease.token, clock.now + 15, None)
    assert lease.token >= 1
    assert await a.holder("c1") == lease
    assert await manager(store, "worker-b", clock).holder("c1") == lease
    record = await store.get_ledger(lease_key("c1"))
    assert record is not None and record.holder == "worker-a"
    assert await store.get_ledger("c1") is None  # the conversation's own ledger is untouched


async def test_another_worker_is_busy_while_the_lease_is_live(
    store: LedgerStore, clock: Clock
) -> None:
    a, b = manager(store, "worker-a", clock), manager(store, "worker-b", clock)
    await a.acquire("c1")
    clock.advance(14.9)

    with pytest.raises(ConversationBusyError, match="worker-a") as caught:
        await b.acquire("c1")

    assert isinstance(caught.value, ConcurrentUpdateError)
    live = await b.holder("c1")
    assert live is not None and live.worker_id == "worker-a"
    await b.acquire("c2")  # other conversations are independent


async def test_the_same_worker_cannot_drive_one_conversation_twice(
    store: LedgerStore, clock: Clock
) -> None:
    a = manager(store, "worker-a", clock)
    lease = await a.acquire("c1")

    with pytest.raises(ConversationBusyError, match="this worker"):
        await a.acquire("c1")

    await a.release(lease)
    again = await a.acquire("c1")
    assert again.took_over_from is None
    assert again.token > lease.token


async def test_a_released_lease_is_taken_without_a_takeover(
    store: LedgerStore, clock: Clock
) -> None:
    a, b = manager(store, "worker-a", clock), manager(store, "worker-b", clock)
    await a.release(await a.acquire("c1"))
    assert await a.holder("c1") is None

    lease = await b.acquire("c1")

    assert lease.worker_id == "worker-b"
    assert lease.took_over_from is None


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_is_fenced_off(
    store: LedgerStore, clock: Clock
) -> None:
    a, b = manager(store, "worker-a", clock), manager(store, "worker-b", clock)
    old = await a.acquire("c1")
    clock.advance(15.0)  # held_until reached: lapsed
    assert await b.holder("c1") is None

    new = await b.acquire("c1")

    assert new.took_over_from == "worker-a"
    assert new.token > old.token
    with pytest.raises(ConcurrentUpdateError, match="taken over or released"):
        await a.renew(old)
    await a.release(old)  # lost already: nothing happens
    assert await a.holder("c1") == new


async def test_renew_extends_the_lease_and_an_older_token_can_never_renew_again(
    store: LedgerStore, clock: Clock
) -> None:
    a, b = manager(store, "worker-a", clock), manager(store, "worker-b", clock)
    first = await a.acquire("c1")
    clock.advance(10)

    second = await a.renew(first)

    assert second.token > first.token
    assert second.expires_at == clock.now + 15
    assert second.took_over_from is None
    clock.advance(10)  # past the first expiry, not the renewed one
    with pytest.raises(ConversationBusyError):
        await b.acquire("c1")
    with pytest.raises(ConcurrentUpdateError):
        await a.renew(first)  # a stale token (say, a duplicate timer) loses
    assert await a.holder("c1") == second


async def test_a_lapsed_lease_that_nobody_took_can_still_be_renewed(
    store: LedgerStore, clock: Clock
) -> None:
    a = manager(store, "worker-a", clock)
    lease = await a.acquire("c1")
    clock.advance(60)

    renewed = await a.renew(lease)

    assert await a.holder("c1") == renewed


async def test_a_restarted_worker_takes_over_its_previous_incarnation(
    store: LedgerStore, clock: Clock
) -> None:
    await manager(store, "worker-a", clock).acquire("c1")  # then the process dies

    lease = await manager(store, "worker-a", clock).acquire("c1")

    assert lease.took_over_from == "worker-a"  # its attempt in flight must be closed


async def test_only_one_of_many_racing_workers_gets_the_lease(
    store: LedgerStore, clock: Clock
) -> None:
    workers = [manager(store, f"worker-{i}", clock) for i in range(6)]

    results = await asyncio.gather(*(w.acquire("c1") for w in workers), return_exceptions=True)

    won = [r for r in results if isinstance(r, Lease)]
    assert len(won) == 1, results
    assert all(isinstance(r, ConversationBusyError) for r in results if r not in won)
    assert await workers[0].holder("c1") == won[0]


async def test_forget_deletes_the_lease_record(store: LedgerStore, clock: Clock) -> None:
    a = manager(store, "worker-a", clock)
    await a.acquire("c1")

    await a.forget("c1")

    assert await store.get_ledger(lease_key("c1")) is None
    assert (await a.acquire("c1")).took_over_from is None


async def test_a_lease_belongs_to_its_manager(clock: Clock) -> None:
    store = InMemoryStore()
    lease = await manager(store, "worker-a", clock).acquire("c1")
    with pytest.raises(ValueError, match="worker-a"):
        await manager(store, "worker-b", clock).release(lease)


async def test_bad_arguments_are_refused() -> None:
    with pytest.raises(StoreError, match="LedgerStore"):
        LeaseManager(object(), worker_id="w")
    for ttl in (0, -1.0, True):
        with pytest.raises(ValueError, match="ttl"):
            LeaseManager(InMemoryStore(), worker_id="w", ttl=ttl)
    with pytest.raises(ValueError, match="worker_id"):
        LeaseManager(InMemoryStore(), worker_id="")


# -- hold ---------------------------------------------------------------------------------------


async def test_hold_keeps_others_out_and_releases_on_exit(store: LedgerStore, clock: Clock) -> None:
    a, b = manager(store, "worker-a", clock, TTL), manager(store, "worker-b", clock, TTL)

    async with a.hold("c1") as held:
        assert isinstance(held, HeldLease)
        assert held.worker_id == "worker-a" and held.took_over_from is None
        assert not held.lost
        held.check()
        with pytest.raises(ConversationBusyError):
            await b.acquire("c1")
        with pytest.raises(ConversationBusyError):
            async with b.hold("c1"):
                pytest.fail("entered a conversation another worker holds")

    assert await a.holder("c1") is None
    assert (await b.acquire("c1")).took_over_from is None


async def test_hold_releases_when_the_block_raises(store: LedgerStore, clock: Clock) -> None:
    a = manager(store, "worker-a", clock, TTL)

    with pytest.raises(RuntimeError, match="boom"):
        async with a.hold("c1"):
            raise RuntimeError("boom")

    assert await a.holder("c1") is None


async def test_hold_renews_in_the_background(store: LedgerStore, clock: Clock) -> None:
    a, b = manager(store, "worker-a", clock, TTL), manager(store, "worker-b", clock, TTL)

    async with a.hold("c1") as held:
        first = held.current
        clock.advance(TTL / 2)
        renewed = await wait_until_renewed(a, "c1", first.expires_at)
        clock.advance(TTL / 2)  # the first expiry has passed, the renewed one has not
        assert clock.now >= first.expires_at

        with pytest.raises(ConversationBusyError):
            await b.acquire("c1")
        assert held.token >= renewed.token > first.token
        assert not held.lost

    assert await a.holder("c1") is None  # released under the renewed token


async def test_hold_reports_a_takeover_as_lost(store: LedgerStore, clock: Clock) -> None:
    a, b = manager(store, "worker-a", clock, TTL), manager(store, "worker-b", clock, TTL)
    calls: list[HeldLease] = []

    async with a.hold("c1", on_lost=calls.append) as held:
        clock.advance(TTL * 10)  # a stalls past its lease; b takes the conversation
        taken = await b.acquire("c1")
        assert taken.took_over_from == "worker-a"
        with anyio.fail_after(WAIT):
            await held.wait_lost()

        assert held.lost
        assert calls == [held]
        with pytest.raises(LeaseLostError, match="taken over"):
            held.check()

    assert await b.holder("c1") == taken  # a's exit released nothing of b's


async def test_hold_reports_a_lease_it_cannot_renew_before_it_lapses(clock: Clock) -> None:
    class Outage(InMemoryStore):
        down = False

        async def put_ledger(
            self,
            key: str,
            blob: str,
            *,
            expected_version: int,
            holder: str | None,
            held_until: float | None,
        ) -> int:
            if self.down:
                raise StoreError("the store is unreachable")
            return await super().put_ledger(
                key, blob, expected_version=expected_version, holder=holder, held_until=held_until
            )

    store = Outage()
    a = manager(store, "worker-a", clock, TTL)

    async with a.hold("c1") as held:
        store.down = True
        clock.advance(TTL * 2)
        with anyio.fail_after(WAIT):
            await held.wait_lost()
        with pytest.raises(LeaseLostError, match="could not be renewed"):
            held.check()
        store.down = False

    # It was never taken over: the exit's release still frees the conversation.
    assert await a.holder("c1") is None


# -- fencing a holder's writes ------------------------------------------------------------------


async def test_a_held_lease_fences_commits_until_another_worker_takes_it_over(
    store: LedgerStore, clock: Clock
) -> None:
    assert isinstance(store, ConversationStore)
    a, b = manager(store, "worker-a", clock), manager(store, "worker-b", clock)
    await store.create_conversation("c1", strategy="replay")
    first, second = straight(2)

    async with a.hold("c1") as held:
        async with held.fenced() as fence:
            assert fence == Fence(lease_key("c1"), held.token)
            await store.commit("c1", [first], expected_head=None, new_head=first.id, fence=fence)
        clock.advance(20)  # a stalls past its lease, nobody has noticed yet
        await b.acquire("c1")
        async with held.fenced() as stale:
            with pytest.raises(FencedOutError):
                await store.commit(
                    "c1", [second], expected_head=first.id, new_head=second.id, fence=stale
                )

    assert await store.get_head("c1") == first.id
    assert [n.id for n in (await store.load_graph("c1")).nodes()] == [first.id]


async def test_before_request_renews_the_lease_and_refuses_once_it_is_taken_over(
    store: LedgerStore, clock: Clock
) -> None:
    a, b = manager(store, "worker-a", clock), manager(store, "worker-b", clock)
    calls: list[HeldLease] = []

    async with a.hold("c1", on_lost=calls.append) as held:
        token, expires = held.token, held.expires_at
        clock.advance(10)
        await held.before_request()
        assert held.token > token and held.expires_at == clock.now + 15 > expires
        clock.advance(10)  # past the first expiry, not the renewed one
        with pytest.raises(ConversationBusyError):
            await b.acquire("c1")

        clock.advance(20)
        await b.acquire("c1")
        with pytest.raises(LeaseLostError, match="taken over"):
            await held.before_request()
        assert held.lost
        with anyio.fail_after(WAIT):  # the keeper reports the loss found in the foreground
            while not calls:
                await anyio.sleep(0.01)
        assert calls == [held]
        with pytest.raises(LeaseLostError):
            async with held.fenced():
                pytest.fail("a lost lease handed out a fence")


async def test_a_hold_ends_at_once_however_long_its_renewal_period(
    store: LedgerStore, clock: Clock
) -> None:
    a = manager(store, "worker-a", clock, ttl=3_600)  # renews every 20 minutes

    with anyio.fail_after(WAIT):  # a guard against a hang: the exit waits for no renewal tick
        async with a.hold("c1"):
            pass
    assert await a.holder("c1") is None


def straight(count: int) -> list[Node]:
    nodes = [Node("n0", None, "user", "complete", [{"role": "user", "content": "hi"}])]
    for i in range(1, count):
        nodes.append(Node(f"n{i}", f"n{i - 1}", "user", "complete", [{"content": str(i)}]))
    return nodes
