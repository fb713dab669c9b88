"""One OS process of the PostgreSQL multi-process test (run by ``test_store_postgres.py``).

``python _pg_worker.py URL SCHEMA CONVERSATION INDEX WORKERS OPS`` opens its own
``PostgresStore`` and runs ``OPS`` operations on the shared conversation: appending a turn,
retrying an answer, switching branches. A turn is two commits, each with its attempt record:
the user and ``queued`` assistant nodes with a ``queued`` record, then the completed node with
the ``complete`` record. Every lost compare-and-set is retried after reading the graph again.
After each operation it adds one to a counter kept in a ledger, by compare-and-set too.

The first commit of every worker waits at a barrier until all workers have read the head, so
all but one of those commits must lose. It prints a JSON report of what it committed and lost.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any

from agents_state_ext._attempts import AttemptRecord
from agents_state_ext._graph import ConversationGraph
from agents_state_ext._nodes import Node
from agents_state_ext.errors import ConcurrentUpdateError
from agents_state_ext.stores.postgres import PostgresStore

COUNTER = "counter"
BARRIER = "barrier"
UNFINISHED = ("queued", "streaming", "awaiting_approval")


class Worker:
    def __init__(self, store: PostgresStore, conversation: str, index: int, workers: int) -> None:
        self.store, self.conversation = store, conversation
        self.index, self.workers = index, workers
        self.rng = random.Random(index)
        self.waiting = True  # at the barrier before the first commit
        self.report: dict[str, Any] = {
            "nodes": {},  # committed node id -> its text
            "attempts": [],  # committed attempt ids (each finished as complete)
            "lost_nodes": [],  # node ids of commits that lost their compare-and-set
            "lost_attempts": [],
            "conflicts": 0,
            "increments": 0,
            "switches": 0,
        }

    async def run(self, ops: int) -> None:
        for op in range(ops):
            kind = "append" if op == 0 else self.rng.choice(["append", "append", "retry", "switch"])
            if kind == "switch":
                await self.switch()
            else:
                await self.turn(op, retry=kind == "retry")
            await self.bump(COUNTER)
            self.report["increments"] += 1

    async def turn(self, op: int, *, retry: bool) -> None:
        while True:
            graph = await self.store.load_graph(self.conversation)
            head = graph.active_leaf
            user = _last_user(graph) if retry else None
            if user is None:  # nothing to retry yet: append instead
                retry = False
                text = f"worker {self.index} op {op}: {self.rng.random()}"
                user = graph.add_user(text, parent_id=_anchor(graph))
            node = graph.retry(user.id) if retry else graph.start_attempt(user.id)
            record = AttemptRecord(
                node.id, str(node.attempt_id), parent_user_id=user.id, started_at=time.time()
            )
            changes = graph.take_changes()
            if self.waiting:
                await self.barrier()
            try:
                await self.store.commit(
                    self.conversation,
                    changes,
                    expected_head=head,
                    new_head=node.id,
                    attempts=[record],
                )
            except ConcurrentUpdateError:
                self.report["conflicts"] += 1
                self.report["lost_nodes"] += [n.id for n in changes]
                self.report["lost_attempts"].append(record.attempt_id)
                continue
            break
        for written in changes:
            self.report["nodes"][written.id] = written.text()
        reply = f"reply {node.id}"
        while True:  # finish the attempt, wherever the head has moved meanwhile
            graph = await self.store.load_graph(self.conversation)
            head = graph.active_leaf
            item = {"type": "message", "role": "assistant", "content": reply}
            graph.complete(node.id, items=[item])
            record.status, record.finished_at = "complete", time.time()
            try:
                await self.store.commit(
                    self.conversation,
                    graph.take_changes(),
                    expected_head=head,
                    new_head=head,
                    attempts=[record],
                )
            except ConcurrentUpdateError:
                self.report["conflicts"] += 1
                continue
            break
        self.report["nodes"][node.id] = reply
        self.report["attempts"].append(record.attempt_id)

    async def switch(self) -> None:
        while True:
            graph = await self.store.load_graph(self.conversation)
            head = graph.active_leaf
            target = self.rng.choice(graph.branches())
            try:
                await self.store.commit(self.conversation, [], expected_head=head, new_head=target)
            except ConcurrentUpdateError:
                self.report["conflicts"] += 1
                continue
            self.report["switches"] += 1
            return

    async def bump(self, key: str) -> int:
        """Add one to the counter kept under ``key``; the new value."""
        while True:
            stored = await self.store.get_ledger(key)
            count = json.loads(stored.blob)["count"] if stored else 0
            try:
                await self.store.put_ledger(
                    key,
                    json.dumps({"count": count + 1}),
                    expected_version=stored.version if stored else 0,
                    holder=None,
                    held_until=None,
                )
            except ConcurrentUpdateError:
                continue
            return int(count + 1)

    async def barrier(self) -> None:
        self.waiting = False
        await self.bump(BARRIER)
        deadline = time.monotonic() + 120  # a guard against a worker that never started
        while time.monotonic() < deadline:
            stored = await self.store.get_ledger(BARRIER)
            if stored is not None and json.loads(stored.blob)["count"] >= self.workers:
                return
            await asyncio.sleep(0.01)
        raise SystemExit("the other workers never reached the barrier")


def _anchor(graph: ConversationGraph) -> str | None:
    """The nearest node on the active path a user message may follow (a finished answer)."""
    for node in reversed(graph.active_path()):
        if node.role != "user" and node.status not in UNFINISHED:
            return node.id
    return None


def _last_user(graph: ConversationGraph) -> Node | None:
    """The last user message on the active path, to answer again."""
    for node in reversed(graph.active_path()):
        if node.role == "user":
            return node
    return None


async def main(argv: list[str]) -> dict[str, Any]:
    url, schema, conversation, index, workers, ops = argv
    store = await PostgresStore.connect(url, schema=schema, max_size=2)
    async with store:
        worker = Worker(store, conversation, int(index), int(workers))
        await worker.run(int(ops))
        return worker.report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
