"""One OS process of the multi-process Redis test: turns, retries and switches on one conversation.

``python _redis_worker.py URL NAMESPACE CONVERSATION WORKER OPS WORKERS``

It connects, says it is ready and waits at a barrier (the test releases every worker at once,
so they really overlap). Its first graph commit and its first ledger write each wait, after
reading, until all WORKERS have read: they then all write from the same version, so at least
WORKERS - 1 of each conflict, however idle the machine (a race left to chance may not happen).
Then it runs OPS graph operations and OPS ledger increments. Each one
reads, changes and writes back with compare-and-set; on ``ConcurrentUpdateError`` it re-reads
and tries again. It prints one JSON report on stdout: every commit that succeeded (its head
move, the nodes and final attempt records it wrote), every one that lost, and the counts.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any

import redis.asyncio as aioredis

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node
from agents_state_ext.errors import ConcurrentUpdateError
from agents_state_ext.stores.redis import RedisStore

BARRIER_TIMEOUT = 120  # seconds; only a guard against a test that died before releasing us


def ready_key(namespace: str) -> str:
    return f"{namespace}:test:ready"


def go_key(namespace: str) -> str:
    return f"{namespace}:test:go"


class ReadBarrier:
    """Makes the first write of each kind wait until every worker has read the same version."""

    def __init__(self, raw: aioredis.Redis, namespace: str, workers: int) -> None:
        self.raw, self.namespace, self.workers = raw, namespace, workers
        self.passed: set[str] = set()

    async def wait(self, kind: str) -> None:
        if kind in self.passed:
            return
        self.passed.add(kind)
        key = f"{self.namespace}:test:read:{kind}"
        await self.raw.rpush(key, "1")
        deadline = time.monotonic() + BARRIER_TIMEOUT
        while await self.raw.llen(key) < self.workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"the other workers never read ({kind})")
            await asyncio.sleep(0.005)


def plan(graph: ConversationGraph, kind: str, worker: int, op: int, rng: random.Random) -> Node:
    """Change ``graph`` for one operation; the node the head moves to."""
    head = graph.get(graph.active_leaf) if graph.active_leaf is not None else None
    if kind == "switch":
        choices = [n for n in graph.nodes() if n.role == "assistant" and n.status == "complete"]
        choices = [n for n in choices if n.id != graph.active_leaf]
        if choices:
            return graph.switch(rng.choice(choices).id)
    if kind == "retry" and head is not None and head.role == "assistant":
        return graph.retry()
    graph.add_user(f"worker {worker}, operation {op}")
    return graph.start_attempt()


def finish(graph: ConversationGraph, node: Node, rng: random.Random) -> list[AttemptRecord]:
    """End a new attempt; its record as queued, then final (both go in the same commit)."""
    queued = AttemptRecord(
        node.id,
        str(node.attempt_id),
        parent_user_id=node.parent_id,
        request_id=node.request_id,
        started_at=time.time(),
    )
    if rng.random() < 0.8:
        reply = {"type": "message", "role": "assistant", "content": f"reply to {node.parent_id}"}
        graph.complete(node.id, items=[reply])
    else:
        graph.fail(node.id, "HTTP 500")
    final = AttemptRecord.from_dict(
        {**queued.to_dict(), "status": node.status, "finished_at": time.time()}
    )
    return [queued, final]


async def graph_operation(
    store: RedisStore,
    conversation: str,
    worker: int,
    op: int,
    rng: random.Random,
    barrier: ReadBarrier,
) -> dict[str, Any]:
    kind = rng.choice(["turn", "turn", "retry", "switch"])
    lost: list[dict[str, Any]] = []
    while True:
        graph = await store.load_graph(conversation)
        graph.take_changes()
        expected = graph.active_leaf
        node = plan(graph, kind, worker, op, rng)
        attempts = finish(graph, node, rng) if node.status == "queued" else []
        changes = graph.take_changes()
        await barrier.wait("graph")
        await asyncio.sleep(rng.random() / 500)  # widen the window between read and write
        try:
            await store.commit(
                conversation,
                changes,
                expected_head=expected,
                new_head=graph.active_leaf,
                attempts=attempts,
            )
        except ConcurrentUpdateError:
            lost.append(
                {"nodes": [n.id for n in changes], "attempts": [a.attempt_id for a in attempts]}
            )
            continue
        return {
            "expected": expected,
            "new": graph.active_leaf,
            "nodes": [n.to_dict() for n in changes],
            "attempts": [a.to_dict() for a in attempts[-1:]],
            "lost": lost,
        }


async def increment(
    store: RedisStore, key: str, token: str, rng: random.Random, barrier: ReadBarrier
) -> int:
    """Add one to the counter kept as a ledger; the number of conflicts met on the way."""
    conflicts = 0
    while True:
        record = await store.get_ledger(key)
        version = record.version if record is not None else 0
        count = json.loads(record.blob)["count"] if record is not None else 0
        await barrier.wait("ledger")
        await asyncio.sleep(rng.random() / 1000)
        try:
            await store.put_ledger(
                key,
                json.dumps({"count": count + 1}),
                expected_version=version,
                holder=token,
                held_until=None,
            )
        except ConcurrentUpdateError:
            conflicts += 1
            continue
        return conflicts


async def main(
    url: str, namespace: str, conversation: str, worker: int, ops: int, workers: int
) -> None:
    rng = random.Random(worker)
    # No socket timeout (redis-py's default is 5 s): the barrier waits as long as BLPOP says.
    raw = aioredis.Redis.from_url(url, decode_responses=True, socket_timeout=None)
    store = await RedisStore.connect(url, namespace=namespace)
    try:
        await raw.rpush(ready_key(namespace), str(worker))
        if await raw.blpop([go_key(namespace)], timeout=BARRIER_TIMEOUT) is None:
            raise SystemExit("the test never released the barrier")
        commits, ledger_conflicts = [], 0
        barrier = ReadBarrier(raw, namespace, workers)
        for op in range(ops):
            commits.append(await graph_operation(store, conversation, worker, op, rng, barrier))
            token = f"worker-{worker}"
            ledger_conflicts += await increment(store, conversation, token, rng, barrier)
    finally:
        await store.aclose()
        await raw.aclose()
    report = {
        "worker": worker,
        "commits": commits,
        "increments": ops,
        "ledger_conflicts": ledger_conflicts,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    url, namespace, conversation, worker, ops, workers = sys.argv[1:]
    asyncio.run(main(url, namespace, conversation, int(worker), int(ops), int(workers)))
