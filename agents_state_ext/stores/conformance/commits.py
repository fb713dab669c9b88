"""Core checks: ``commit`` under compare-and-set, its atomicity and races, and deletes."""

from __future__ import annotations

import asyncio

from ..._attempts import AttemptRecord
from ..._nodes import Node
from ...errors import ConcurrentUpdateError, ConversationNotFoundError, NodeNotFoundError
from ..base import AttemptNotFoundError
from ._support import StoreFactory, expect, opened, raises, sample_graph, store_sample


async def check_head_compare_and_set(factory: StoreFactory) -> None:
    """Heads move only from the expected value, and only to a stored node (or None)."""
    async with opened(factory) as store:
        graph = sample_graph()
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", graph.nodes(), expected_head=None, new_head=None)
        first, second = graph.nodes()[1].id, graph.nodes()[2].id
        expect(await store.get_head("c1") is None, "a new conversation has a head")
        await store.commit("c1", [], expected_head=None, new_head=first)
        expect(await store.get_head("c1") == first, "commit did not move the head")
        await raises(
            ConcurrentUpdateError,
            "moving from a stale head",
            store.commit("c1", [], expected_head=None, new_head=second),
        )
        expect(await store.get_head("c1") == first, "a lost compare-and-set moved the head")
        await raises(
            NodeNotFoundError,
            "moving to an unknown node",
            store.commit("c1", [], expected_head=first, new_head="missing"),
        )
        expect(await store.get_head("c1") == first, "a refused commit moved the head")
        await store.commit("c1", [], expected_head=first, new_head=None)
        expect(await store.get_head("c1") is None, "the head cannot be cleared")


async def check_commit_is_atomic(factory: StoreFactory) -> None:
    """``commit`` writes nodes and head together; a lost compare-and-set writes nothing."""
    async with opened(factory) as store:
        graph = await store_sample(store)
        head = await store.get_head("c1")
        mine, theirs = await store.load_graph("c1"), await store.load_graph("c1")
        mine.add_user("mine")
        theirs.add_user("theirs")
        await store.commit("c1", mine.take_changes(), expected_head=head, new_head=mine.active_leaf)
        lost = theirs.take_changes()
        await raises(
            ConcurrentUpdateError,
            "a commit from a stale head",
            store.commit("c1", lost, expected_head=head, new_head=lost[-1].id),
        )
        expect(await store.get_head("c1") == mine.active_leaf, "the loser moved the head")
        await raises(NodeNotFoundError, "loser's node kept", store.get_node("c1", lost[-1].id))
        count = len(await store.load_graph("c1"))
        expect(count == len(graph) + 1, f"wrong node count after commit: {count}")
        orphan = Node("orphan", None, "user", "complete")
        await raises(
            NodeNotFoundError,
            "commit to an unknown head",
            store.commit("c1", [orphan], expected_head=mine.active_leaf, new_head="missing"),
        )
        await raises(NodeNotFoundError, "refused commit wrote", store.get_node("c1", "orphan"))


async def check_orphan_parent_refused(factory: StoreFactory) -> None:
    """A node whose parent is neither stored nor in the same commit is refused, with the commit.

    ``NodeNotFoundError``, and nothing of that commit is written (its other nodes, its
    records, its head); a parent stored in another conversation does not count. A parent
    written in the same commit does, in any order, and so does a stored one.
    """
    root = Node("m0", None, "user", "complete")
    reply = Node("m1", "m0", "assistant", "complete", attempt_id="att_1")
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.create_conversation("c2", strategy="replay")
        await store.commit("c1", [reply, root], expected_head=None, new_head="m1")
        expect(await store.get_head("c1") == "m1", "a child before its parent was refused")
        orphan = Node("m3", "m2", "assistant", "queued", attempt_id="att_3")
        fine = Node("u1", "m1", "user", "complete")
        record = AttemptRecord("m3", "att_3", started_at=1.0)
        for nodes, what in (([orphan], "an orphan"), ([fine, orphan], "an orphan with others")):
            await raises(
                NodeNotFoundError,
                f"a commit of {what}",
                store.commit("c1", nodes, expected_head="m1", new_head="m3", attempts=[record]),
            )
            expect(await store.get_head("c1") == "m1", f"a refused commit ({what}) moved the head")
            for node in nodes:
                await raises(
                    NodeNotFoundError,
                    f"a node of a refused commit ({what})",
                    store.get_node("c1", node.id),
                )
            expect(await store.list_attempts("c1") == [], f"a refused commit ({what}) wrote")
        await raises(
            NodeNotFoundError,
            "a parent stored in another conversation",
            store.commit("c2", [fine], expected_head=None, new_head="u1"),
        )
        await store.commit("c1", [fine], expected_head="m1", new_head="u1")
        rewritten = Node("m1", "m0", "assistant", "failed", attempt_id="att_1")
        await store.commit("c1", [rewritten], expected_head="u1", new_head="u1")
        graph = await store.load_graph("c1")
        expect([n.id for n in graph.active_path()] == ["m0", "m1", "u1"], "wrong stored path")


async def check_commit_attempts(factory: StoreFactory) -> None:
    """``commit(attempts=...)`` writes attempt records with the nodes and head, or nothing."""
    root = Node("m0", None, "user", "complete")
    reply = Node("m1", "m0", "assistant", "complete", attempt_id="att_1")
    record = AttemptRecord("m1", "att_1", started_at=5.0, status="complete")
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit(
            "c1", [root, reply], expected_head=None, new_head="m1", attempts=[record]
        )
        got = await store.get_attempt("c1", "att_1")
        expect(got.to_dict() == record.to_dict(), "a committed attempt changed in the store")
        rival = Node("m2", "m1", "assistant", "complete", attempt_id="att_2")
        lost = AttemptRecord("m2", "att_2", started_at=6.0)
        replaced = AttemptRecord("m1", "att_1", started_at=5.0, status="failed")
        await raises(
            ConcurrentUpdateError,
            "a commit with attempts from a stale head",
            store.commit(
                "c1", [rival], expected_head="m0", new_head="m2", attempts=[lost, replaced]
            ),
        )
        await raises(
            AttemptNotFoundError,
            "a lost commit wrote its attempt",
            store.get_attempt("c1", "att_2"),
        )
        again = await store.get_attempt("c1", "att_1")
        expect(again.status == "complete", "a lost commit replaced an attempt")
        await raises(NodeNotFoundError, "a lost commit wrote its node", store.get_node("c1", "m2"))
        await raises(
            NodeNotFoundError,
            "a commit with attempts to an unknown head",
            store.commit("c1", [rival], expected_head="m1", new_head="missing", attempts=[lost]),
        )
        await raises(
            AttemptNotFoundError,
            "a refused commit wrote its attempt",
            store.get_attempt("c1", "att_2"),
        )
        early = AttemptRecord("m1", "att_0", started_at=1.0)
        await store.commit("c1", [], expected_head="m1", new_head="m1", attempts=[replaced, early])
        order = [(r.attempt_id, r.status) for r in await store.list_attempts("c1")]
        expect(order == [("att_0", "queued"), ("att_1", "failed")], f"attempts {order}")


async def check_concurrent_commits(factory: StoreFactory) -> None:
    """Commits racing from the same head on one store (``asyncio.gather``): exactly one wins."""
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        root = Node("root", None, "system", "complete")
        await store.commit("c1", [root], expected_head=None, new_head="root")
        rivals = [Node(f"r{i}", "root", "user", "complete") for i in range(6)]
        results = await asyncio.gather(
            *(
                store.commit("c1", [node], expected_head="root", new_head=node.id)
                for node in rivals
            ),
            return_exceptions=True,
        )
        won = [n.id for n, r in zip(rivals, results, strict=True) if r is None]
        lost = [r for r in results if isinstance(r, ConcurrentUpdateError)]
        expect(len(won) == 1, f"{len(won)} commits from the same head won: {results}")
        expect(len(lost) == len(rivals) - 1, f"the losers did not all conflict: {results}")
        expect(await store.get_head("c1") == won[0], "the head is not the winner's node")
        graph = await store.load_graph("c1")
        expect(len(graph) == 2, f"a losing commit wrote its node: {len(graph)} nodes")


async def check_delete_conversation(factory: StoreFactory) -> None:
    """``delete_conversation`` forgets everything under the id, and only under it."""
    async with opened(factory) as store:
        await store_sample(store, "c1")
        kept = await store_sample(store, "c2")
        for cid in ("c1", "c2"):
            await store.put_attempt(cid, AttemptRecord("m1", "att_1", started_at=1.0))
            await store.put_run_state(cid, "att_1", "paused")
        await store.delete_conversation("c1")
        expect(await store.list_conversations() == ["c2"], "the conversation is still listed")
        await raises(
            ConversationNotFoundError, "a deleted conversation", store.get_conversation("c1")
        )
        await raises(ConversationNotFoundError, "delete twice", store.delete_conversation("c1"))
        await store.create_conversation("c1", strategy="previous_response")
        expect(len(await store.load_graph("c1")) == 0, "a deleted conversation's nodes came back")
        expect(await store.get_head("c1") is None, "a deleted conversation's head came back")
        expect(await store.list_attempts("c1") == [], "deleted attempts came back")
        expect(await store.get_run_state("c1", "att_1") is None, "a deleted run state came back")
        info = await store.get_conversation("c1")
        expect(info.strategy == "previous_response", "a re-created conversation is the old one")
        other = await store.load_graph("c2")
        expect(other.to_dict() == kept.to_dict(), "deleting c1 changed c2")
        expect(len(await store.list_attempts("c2")) == 1, "deleting c1 removed c2's attempts")
        expect(await store.get_run_state("c2", "att_1") == "paused", "c2's run state is gone")
