"""Attempts a dead worker left in flight are closed as interrupted, once, by the next driver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node
from agents_state_ext.errors import ConcurrentUpdateError
from agents_state_ext.server.leases import ConversationBusyError, LeaseManager
from agents_state_ext.server.recovery import close_interrupted
from agents_state_ext.stores import ConversationStore, InMemoryStore

pytestmark = pytest.mark.anyio

REASON = "worker-a stopped renewing its lease"
FINAL = {"complete", "cancelled", "failed"}


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConversationStore]:
    made = await BACKENDS[request.param](tmp_path)()
    yield made
    await made.aclose()


@dataclass
class Scene:
    """What the dead worker left: ids of the nodes it wrote."""

    user1: str
    done: str  # complete
    user2: str
    paused: str  # awaiting_approval: must be left alone
    streaming: str  # mid-stream when the worker died
    queued: str  # started, nothing streamed yet


def record(node: Node, status: str, **fields: Any) -> AttemptRecord:
    return AttemptRecord(
        message_id=node.id,
        attempt_id=str(node.attempt_id),
        parent_user_id=node.parent_id,
        request_id=node.request_id,
        model="gpt-test",
        included={node.parent_id or "": 7},
        status=status,
        started_at=100.0,
        **fields,
    )


async def dead_worker(store: ConversationStore, conversation_id: str = "c1") -> Scene:
    """Write, as a worker that then died would have, a conversation with attempts in flight."""
    await store.create_conversation(conversation_id, strategy="replay")
    graph = ConversationGraph(conversation_id)
    user1 = graph.add_user("hello")
    done = graph.start_attempt()
    graph.stream(done.id, "hi there")
    graph.complete(done.id)
    user2 = graph.add_user("what is the weather?")
    paused = graph.start_attempt()
    call = {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    graph.pause(paused.id, items=[call], meta={"pending": ["call_1"]})
    streaming = graph.retry(user2.id)
    graph.stream(streaming.id, "It is sunny in")
    queued = graph.retry(user2.id)
    records = [
        record(done, "complete", finished_at=101.0, response_id="resp_1"),
        record(paused, "awaiting_approval"),
        record(streaming, "queued"),
        record(queued, "queued"),
    ]
    await store.commit(
        conversation_id,
        graph.take_changes(),
        expected_head=None,
        new_head=graph.active_leaf,
        attempts=records,
    )
    return Scene(user1.id, done.id, user2.id, paused.id, streaming.id, queued.id)


async def snapshot(store: ConversationStore, conversation_id: str = "c1") -> dict[str, Any]:
    """Everything stored about the conversation, comparable."""
    graph = await store.load_graph(conversation_id)  # raises if the stored graph is not a tree
    return {
        "head": await store.get_head(conversation_id),
        "nodes": {n.id: n.to_dict() for n in graph.nodes()},
        "attempts": {a.attempt_id: a.to_dict() for a in await store.list_attempts(conversation_id)},
    }


def check_consistent(state: dict[str, Any]) -> None:
    """No attempt is left running, and every attempt's node and record agree."""
    for node in state["nodes"].values():
        if node["role"] != "assistant":
            continue
        assert node["status"] not in ("queued", "streaming"), node
        attempt = state["attempts"][node["attempt_id"]]
        assert attempt["message_id"] == node["id"]
        if node["status"] != "invalid":
            assert attempt["status"] == node["status"], (node, attempt)
    for attempt in state["attempts"].values():
        assert attempt["status"] in (*FINAL, "awaiting_approval"), attempt


async def test_attempts_left_in_flight_are_closed_once(store: ConversationStore) -> None:
    scene = await dead_worker(store)
    before = await snapshot(store)

    closed = await close_interrupted(store, "c1", reason=REASON)

    assert closed == [
        before["nodes"][scene.streaming]["attempt_id"],
        before["nodes"][scene.queued]["attempt_id"],
    ]
    after = await snapshot(store)
    check_consistent(after)
    assert after["head"] == before["head"] == scene.queued
    for node_id in (scene.streaming, scene.queued):
        node, old = after["nodes"][node_id], before["nodes"][node_id]
        assert node["status"] == "failed"
        assert node["items"] == old["items"]  # the partial answer is kept
        assert node["meta"]["interrupted"] is True
        assert node["meta"]["error"] == REASON
        assert node["meta"]["finished_at"] >= 0
        attempt, old_attempt = (
            after["attempts"][node["attempt_id"]],
            before["attempts"][node["attempt_id"]],
        )
        assert attempt["status"] == "failed"
        assert attempt["error"] == f"interrupted: {REASON}"
        assert attempt["finished_at"] is not None
        unchanged = {k: v for k, v in old_attempt.items() if k not in ("status", "error")}
        assert {k: attempt[k] for k in unchanged if k != "finished_at"} == {
            k: v for k, v in unchanged.items() if k != "finished_at"
        }
    assert after["nodes"][scene.streaming]["items"][-1]["content"] == "It is sunny in"
    for node_id in (scene.user1, scene.done, scene.user2, scene.paused):  # left alone
        assert after["nodes"][node_id] == before["nodes"][node_id]
        attempt_id = before["nodes"][node_id]["attempt_id"]
        if attempt_id is not None:
            assert after["attempts"][attempt_id] == before["attempts"][attempt_id]
    assert after["nodes"][scene.paused]["status"] == "awaiting_approval"

    assert await close_interrupted(store, "c1", reason="again") == []
    assert await snapshot(store) == after


async def test_the_user_can_retry_after_the_close(store: ConversationStore) -> None:
    scene = await dead_worker(store)
    await close_interrupted(store, "c1", reason=REASON)

    graph = await store.load_graph("c1")
    retry = graph.retry(scene.user2)
    await store.commit("c1", graph.take_changes(), expected_head=scene.queued, new_head=retry.id)

    state = await snapshot(store)
    assert state["head"] == retry.id
    siblings = [n for n in state["nodes"].values() if n["parent_id"] == scene.user2]
    assert [n["status"] for n in siblings] == ["awaiting_approval", "failed", "failed", "queued"]


async def test_an_attempt_whose_record_was_never_stored_gets_one(store: ConversationStore) -> None:
    await store.create_conversation("c1", strategy="replay")
    graph = ConversationGraph("c1")
    graph.add_user("hello")
    attempt = graph.start_attempt()
    await store.commit("c1", graph.take_changes(), expected_head=None, new_head=attempt.id)

    closed = await close_interrupted(store, "c1", reason=REASON)

    assert closed == [attempt.attempt_id]
    stored = await store.get_attempt("c1", str(attempt.attempt_id))
    assert stored.message_id == attempt.id
    assert stored.parent_user_id == attempt.parent_id
    assert stored.request_id == attempt.request_id
    assert (stored.status, stored.error) == ("failed", f"interrupted: {REASON}")
    check_consistent(await snapshot(store))


async def test_an_attempt_an_edit_invalidated_mid_stream_gets_its_record_closed(
    store: ConversationStore,
) -> None:
    await store.create_conversation("c1", strategy="replay")
    graph = ConversationGraph("c1")
    user = graph.add_user("hello")
    attempt = graph.start_attempt()
    graph.stream(attempt.id, "partial")
    queued = record(attempt, "queued")
    await store.commit(
        "c1", graph.take_changes(), expected_head=None, new_head=attempt.id, attempts=[queued]
    )
    edited = graph.edit(user.id, "hello again")  # another handle's edit, then the worker died
    await store.commit("c1", graph.take_changes(), expected_head=attempt.id, new_head=edited.id)

    closed = await close_interrupted(store, "c1", reason=REASON)

    assert closed == [attempt.attempt_id]
    node = await store.get_node("c1", attempt.id)
    assert node.status == "invalid"
    assert node.meta["invalidated_by"] == edited.id
    assert node.meta["interrupted"] is True
    assert node.text() == "partial"
    stored = await store.get_attempt("c1", str(attempt.attempt_id))
    assert stored.status == "failed"
    assert await store.get_head("c1") == edited.id
    assert await close_interrupted(store, "c1", reason=REASON) == []


class Recording(InMemoryStore):
    """An in-memory store that keeps every commit it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[tuple[list[str], str | None]] = []

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        nodes = list(nodes)
        self.commits.append(([n.id for n in nodes], new_head))
        await super().commit(
            conversation_id,
            nodes,
            expected_head=expected_head,
            new_head=new_head,
            attempts=attempts,
        )


async def test_nothing_in_flight_writes_nothing() -> None:
    store = Recording()
    await store.create_conversation("c1", strategy="replay")
    graph = ConversationGraph("c1")
    graph.add_user("hello")
    attempt = graph.start_attempt()
    graph.complete(attempt.id)
    await store.commit("c1", graph.take_changes(), expected_head=None, new_head=attempt.id)
    store.commits.clear()

    assert await close_interrupted(store, "c1", reason=REASON) == []
    assert store.commits == []
    await store.create_conversation("empty", strategy="replay")
    assert await close_interrupted(store, "empty", reason=REASON) == []
    assert store.commits == []


async def test_a_lost_compare_and_set_reads_again_and_keeps_the_other_write() -> None:
    class Racing(Recording):
        """Another handle switches the branch just before close_interrupted's first commit."""

        switch_to: str | None = None

        async def commit(
            self,
            conversation_id: str,
            nodes: Iterable[Node],
            *,
            expected_head: str | None,
            new_head: str | None,
            attempts: Iterable[AttemptRecord] = (),
        ) -> None:
            target, self.switch_to = self.switch_to, None
            if target is not None:
                await super().commit(
                    conversation_id, [], expected_head=expected_head, new_head=target
                )
            await super().commit(
                conversation_id,
                nodes,
                expected_head=expected_head,
                new_head=new_head,
                attempts=attempts,
            )

    store = Racing()
    scene = await dead_worker(store)
    store.switch_to = scene.done
    store.commits.clear()

    closed = await close_interrupted(store, "c1", reason=REASON)

    assert len(closed) == 2
    state = await snapshot(store)
    assert state["head"] == scene.done  # the other handle's switch stands
    check_consistent(state)
    closing = [scene.streaming, scene.queued]
    assert store.commits == [
        ([], scene.done),  # the other handle's switch
        (closing, scene.queued),  # lost: the head had moved
        (closing, scene.done),  # read again, landed on the new head
    ]


async def test_a_conversation_that_keeps_changing_is_an_error() -> None:
    class AlwaysMoving(InMemoryStore):
        async def commit(self, *args: Any, **kwargs: Any) -> None:
            raise ConcurrentUpdateError("the head moved")

    store = AlwaysMoving()
    await store.create_conversation("c1", strategy="replay")
    graph = ConversationGraph("c1")
    graph.add_user("hello")
    graph.start_attempt()
    await InMemoryStore.commit(
        store, "c1", graph.take_changes(), expected_head=None, new_head=graph.active_leaf
    )

    with pytest.raises(ConcurrentUpdateError, match="kept changing"):
        await close_interrupted(store, "c1", reason=REASON)
    assert (await store.load_graph("c1")).get(str(graph.active_leaf)).status == "queued"


async def test_the_next_driver_closes_what_the_dead_one_left(store: ConversationStore) -> None:
    now = [1_000.0]

    def clock() -> float:
        return now[0]

    worker_a = LeaseManager(store, worker_id="worker-a", ttl=15, clock=clock)
    worker_b = LeaseManager(store, worker_id="worker-b", ttl=15, clock=clock)
    await worker_a.acquire("c1")
    scene = await dead_worker(store)  # ... and worker-a dies without releasing

    with pytest.raises(ConversationBusyError):
        await worker_b.acquire("c1")  # not before the lease lapses
    now[0] += 15

    lease = await worker_b.acquire("c1")
    assert lease.took_over_from == "worker-a"
    closed = await close_interrupted(store, "c1", reason=f"{lease.took_over_from} died")

    state = await snapshot(store)
    check_consistent(state)
    assert closed == [
        state["nodes"][scene.streaming]["attempt_id"],
        state["nodes"][scene.queued]["attempt_id"],
    ]
    await worker_b.release(lease)
    assert (await worker_a.acquire("c1")).took_over_from is None  # a clean release
    assert await close_interrupted(store, "c1", reason="nothing") == []
