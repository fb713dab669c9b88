"""The fault soak's checks, read back from the store with a fresh handle once the fault is over.

- **no duplicate**: no stored response's context and no mock conversation holds a user message
  or an item twice (:func:`soak.checks.check_mock`);
- **no loss**: every answer a user awaited ``complete`` is stored so (or, edited away since,
  ``invalid`` with ``complete`` before);
- **every attempt final**, **node and record agree**: :func:`disagreements`;
- **typed errors only**: every error a user saw is one of :data:`soak.fault_load.TYPED`, no chat
  got stuck, and a chat whose data the store lost is ``StoreDataLostError`` on opening, never
  an empty history under its id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents_state_ext import AttemptRecord, Node, open_conversation
from agents_state_ext.errors import StoreDataLostError, StoreError
from agents_state_ext.stores import ConversationStore
from agents_state_ext.testing import MockResponsesAPI

from .checks import Findings, check_mock
from .fault_load import ChatLog

__all__ = ["CHECKS", "check_chats", "disagreements"]

FINAL = ("complete", "cancelled", "failed")
CHECKS = (
    "no_duplicate",
    "no_loss",
    "every_attempt_final",
    "node_record_agree",
    "typed_errors_only",
)


def _ended(node: Node) -> Any:
    """The status a node ended in (an invalid one: its status before the edit)."""
    return node.meta.get("status_before_invalid") if node.status == "invalid" else node.status


def disagreements(nodes: Iterable[Node], records: Iterable[AttemptRecord]) -> dict[str, list[str]]:
    """What breaks "every attempt final" and "node and record agree" in one conversation."""
    assistants = {n.id: n for n in nodes if n.role == "assistant"}
    by_node = {r.message_id: r for r in records}
    final = [
        f"{r.message_id}: record {r.status}" for r in by_node.values() if r.status not in FINAL
    ]
    agree = [f"{i}: no record" for i in assistants if i not in by_node]
    for message_id, record in by_node.items():
        node = assistants.get(message_id)
        if node is None:
            agree.append(f"{message_id}: record without a node")
        elif _ended(node) != record.status:
            agree.append(f"{message_id}: node {node.status}/{_ended(node)}, record {record.status}")
    return {"every_attempt_final": final, "node_record_agree": agree}


async def check_chats(
    store: ConversationStore,
    logs: list[ChatLog],
    mock: MockResponsesAPI,
    options: dict[str, Any],
    said_lost: list[str] | None = None,
) -> dict[str, list[str]]:
    """Every check of :data:`CHECKS` over ``logs``' chats in ``store``: the violations of each.

    The chats whose reopening the store answered ``StoreDataLostError`` go into ``said_lost``.
    """
    found: dict[str, list[str]] = {name: [] for name in CHECKS}
    for log in logs:
        where = log.chat_id
        found["typed_errors_only"] += [f"{where}: {e}" for e in log.untyped]
        if log.stuck:
            found["typed_errors_only"].append(f"{where}: stuck (nothing got through)")
        try:
            chat = await open_conversation(store, log.chat_id, **options)
        except StoreDataLostError:
            if said_lost is not None:
                said_lost.append(where)
            continue  # said so, typed: what the store lost is the fault itself
        except StoreError as exc:
            found["typed_errors_only"].append(f"{where}: reopening: {type(exc).__name__}: {exc}")
            continue
        if log.lost:
            found["typed_errors_only"].append(f"{where}: lost, then opened again as if not")
        records = await chat.attempts()
        for name, wrong in disagreements(chat.graph.nodes(), records).items():
            found[name] += [f"{where}/{w}" for w in wrong]
        nodes = {n.id: n for n in chat.graph.nodes()}
        for answer in log.answered:
            if answer not in nodes or _ended(nodes[answer]) != "complete":
                found["no_loss"].append(
                    f"{where}/{answer}: answered, stored as {nodes.get(answer)}"
                )
    findings = Findings()
    check_mock(mock, findings)  # type: ignore[arg-type]  # the in-process mock reads the same
    found["no_duplicate"] = list(findings.duplicated_items)
    return found
