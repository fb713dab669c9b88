"""The soak's checks, each computed from the store and the mock server, not the driver.

- **lost writes**: every send or edit a worker accepted (200) has its user message in the
  conversation's graph; every attempt a stream named has its node and record; every answer
  whose closing ``record`` was streamed is stored with that status and that text.
- **duplicated items**: no stored response's server-side context and no mock conversation
  holds an item id twice or the same user input twice (every user text of a run is unique),
  and the mock refused no request as a duplicate.
- **non-final attempts**: after the final pass no attempt record or assistant node is
  ``queued``, ``streaming`` or ``awaiting_approval``.
- **consistency**: every graph loads as a tree, its active path runs from a root to the head
  and equals the store's own ``active_path``, and every attempt record matches its node
  (and every attempt node has its record).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agents_state_ext.stores.base import ConversationStore
from agents_state_ext.testing import MockServer

from .load import Tally

__all__ = ["Findings", "check_mock", "check_store", "percentile"]

NON_FINAL = ("queued", "streaming", "awaiting_approval")
FINAL = ("complete", "cancelled", "failed")


@dataclass
class Findings:
    """What each check found (empty lists: the check holds), with a few examples of each."""

    lost_writes: list[str] = field(default_factory=list)
    duplicated_items: list[str] = field(default_factory=list)
    non_final: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    stored_stop_latencies: list[tuple[float, bool]] = field(default_factory=list)
    """Seconds from each stop's request to its attempt's stored ``finished_at``, and whether
    the worker streaming it lived (False: it was killed, the stop waited for its lease)."""
    stopped_statuses: Counter[str] = field(default_factory=Counter)
    """The stored status of each attempt a stop was answered 200 for."""
    counts: Counter[str] = field(default_factory=Counter)

    def checks(self) -> dict[str, dict[str, Any]]:
        """Each check: whether it holds, how many findings, the first few."""
        named = {
            "zero_lost_writes": self.lost_writes,
            "zero_duplicated_items": self.duplicated_items,
            "zero_non_final_attempts": self.non_final,
            "every_graph_consistent": self.inconsistent,
        }
        return {
            name: {"ok": not found, "found": len(found), "examples": found[:5]}
            for name, found in named.items()
        }


def percentile(values: Iterable[float], share: float) -> float | None:
    """The ``share`` (0-1) percentile by the nearest-rank method; None without values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


async def check_store(store: ConversationStore, tally: Tally, findings: Findings) -> None:
    """The store's side: lost writes, non-final attempts, consistency, stop latencies."""
    stored = set(await store.list_conversations())
    for cid, _, _ in tally.conversations:
        if cid not in stored:
            findings.lost_writes.append(f"{cid}: created (201) but not in the store")
    graphs: dict[str, Any] = {}
    records: dict[str, dict[str, Any]] = {}
    for cid, _, _ in tally.conversations:
        if cid not in stored:
            continue
        try:
            graph = await store.load_graph(cid)
        except Exception as exc:
            findings.inconsistent.append(f"{cid}: the graph does not load: {exc!r}")
            continue
        graphs[cid] = graph
        attempts = await store.list_attempts(cid)
        records[cid] = {r.attempt_id: r for r in attempts}
        findings.counts["nodes"] += len(graph)
        findings.counts["attempts"] += len(attempts)
        await _check_graph(store, cid, graph, attempts, findings)
    for accepted in tally.accepted:
        _check_accepted(accepted, graphs, records, findings)
    for stop in tally.stops:
        if stop.status != 200 or stop.record is None:
            continue
        record = records.get(stop.conversation_id, {}).get(stop.record["attempt_id"])
        if record is None:
            findings.lost_writes.append(f"{stop.conversation_id}: stopped attempt not stored")
            continue
        findings.stopped_statuses[record.status] += 1
        if record.status != stop.record["status"]:
            cut = "cut by a kill" if stop.answer.final is None else "not cut"
            findings.lost_writes.append(
                f"{stop.conversation_id}/{record.attempt_id}: stop on worker {stop.stop_worker} "
                f"answered {stop.record['status']} ({stop.record.get('error')!r}), stored "
                f"{record.status} ({record.error!r}); streamed by worker "
                f"{stop.streaming_worker}, its stream {cut}, ending {stop.answer.final}"
            )
        if record.finished_at is not None:
            latency = max(0.0, record.finished_at - stop.requested_at)
            findings.stored_stop_latencies.append((latency, stop.answer.final is not None))


async def _check_graph(
    store: ConversationStore, cid: str, graph: Any, attempts: list[Any], findings: Findings
) -> None:
    try:
        path = graph.active_path()
    except Exception as exc:
        findings.inconsistent.append(f"{cid}: active_path fails: {exc!r}")
        return
    if path and path[0].parent_id is not None:
        findings.inconsistent.append(f"{cid}: the active path does not start at a root")
    for parent, child in itertools.pairwise(path):
        if child.parent_id != parent.id:
            findings.inconsistent.append(f"{cid}: the active path breaks at {child.id}")
    if path and path[-1].id != graph.active_leaf:
        findings.inconsistent.append(f"{cid}: the active path does not end at the head")
    served = [n.id for n in await store.active_path(cid)]
    if served != [n.id for n in path]:
        findings.inconsistent.append(f"{cid}: the store's active_path differs from the graph's")
    by_attempt = {r.attempt_id: r for r in attempts}
    for record in attempts:
        if record.status in NON_FINAL:
            findings.non_final.append(f"{cid}/{record.attempt_id}: record {record.status}")
        if record.message_id not in graph:
            findings.inconsistent.append(f"{cid}/{record.attempt_id}: no node {record.message_id}")
            continue
        node = graph.get(record.message_id)
        problems = []
        if node.role != "assistant" or node.attempt_id != record.attempt_id:
            problems.append(f"node {node.id} is {node.role} of attempt {node.attempt_id}")
        if node.parent_id != record.parent_user_id:
            problems.append(f"parent {node.parent_id} != record's {record.parent_user_id}")
        if node.status != record.status and not (
            node.status == "invalid" and record.status in FINAL
        ):
            problems.append(f"node {node.status}, record {record.status}")
        if problems:
            findings.inconsistent.append(f"{cid}/{record.attempt_id}: " + "; ".join(problems))
    for node in graph.nodes():
        if node.status in NON_FINAL:
            findings.non_final.append(f"{cid}/{node.id}: node {node.status}")
        if node.role == "assistant" and node.attempt_id not in by_attempt:
            findings.inconsistent.append(f"{cid}/{node.id}: attempt {node.attempt_id} no record")


def _check_accepted(
    accepted: Any, graphs: dict[str, Any], records: dict[str, dict[str, Any]], findings: Findings
) -> None:
    cid = accepted.conversation_id
    graph = graphs.get(cid)
    what = f"{cid} {accepted.kind} on worker {accepted.worker}"
    if graph is None:
        findings.lost_writes.append(f"{what}: conversation not loadable")
        return
    if accepted.content is not None:
        users = [n for n in graph.nodes() if n.role == "user" and n.text() == accepted.content]
        if len(users) != 1:
            findings.lost_writes.append(f"{what}: {len(users)} user nodes say {accepted.content!r}")
    if accepted.user_id is not None and accepted.user_id not in graph:
        findings.lost_writes.append(f"{what}: user node {accepted.user_id} missing")
    if accepted.attempt_id is None:
        return
    record = records[cid].get(accepted.attempt_id)
    if record is None or accepted.message_id not in graph:
        findings.lost_writes.append(f"{what}: attempt {accepted.attempt_id} missing")
        return
    if accepted.final == "record" and accepted.record is not None:
        findings.counts["streamed_records"] += 1
        if record.status != accepted.record["status"]:
            findings.lost_writes.append(
                f"{what}: streamed {accepted.record['status']}, stored {record.status}"
            )
        node = graph.get(accepted.message_id)
        if record.status in ("complete", "cancelled") and node.text() != accepted.deltas:
            findings.lost_writes.append(
                f"{what}: streamed {accepted.deltas!r}, stored {node.text()!r} ({record.status})"
            )


def check_mock(mock: MockServer, findings: Findings) -> None:
    """The mock's side: every stored response's context and every conversation, once each."""
    requests = mock.requests
    conversations: set[str] = set()
    for request in requests:
        if request.method != "POST" or request.path != "/responses":
            continue
        findings.counts["model_requests"] += 1
        if request.error and "Duplicate" in request.error:
            findings.duplicated_items.append(f"request refused: {request.error}")
        body = request.json or {}
        if isinstance(body.get("conversation"), str):
            conversations.add(body["conversation"])
        elif isinstance(body.get("conversation"), dict):
            conversations.add(body["conversation"]["id"])
    for response_id in mock.response_ids:
        findings.counts["stored_responses"] += 1
        _once_each(f"response {response_id}", mock.transcript(response_id), findings)
    for conversation_id in sorted(conversations):
        try:
            items = mock.conversation_items(conversation_id)
        except KeyError:
            continue
        findings.counts["mock_conversations"] += 1
        _once_each(f"conversation {conversation_id}", items, findings)


def _once_each(where: str, items: list[dict[str, Any]], findings: Findings) -> None:
    ids = Counter(item.get("id") for item in items if item.get("id"))
    users = Counter(
        _text(item)
        for item in items
        if item.get("role") == "user" and item.get("type", "message") == "message"
    )
    for item_id, n in ids.items():
        if n > 1:
            findings.duplicated_items.append(f"{where}: item {item_id} {n} times")
    for text, n in users.items():
        if n > 1:
            findings.duplicated_items.append(f"{where}: user input {text!r} {n} times")


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)
