"""JSON encoding shared by the stores, so every backend accepts and returns the same data."""

from __future__ import annotations

import contextlib
import gc
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node, check_node_fields
from ..errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    FencedOutError,
    GraphError,
    NodeNotFoundError,
    RecordError,
    StoredDataError,
    StoreError,
    StoreValueError,
)

__all__ = [
    "NodeRow",
    "attempt_row",
    "broken_chain",
    "check_blob",
    "check_counts",
    "check_fence",
    "check_hold",
    "check_id",
    "check_limit",
    "check_version",
    "decode",
    "decode_attempt",
    "decode_node",
    "decode_nodes",
    "encode",
    "encode_attempt",
    "encode_node",
    "encode_node_rows",
    "encode_nodes",
    "fenced_out",
    "graph_of",
    "ledger_conflict",
    "missing_conversation",
    "missing_node",
    "missing_parent",
    "start_order",
    "unknown_parents",
]


def _as_dict(value: object) -> dict[Any, Any]:
    # json.dumps' fallback: any other Mapping is written as the dict it holds (what
    # copy_json made of it before a node was encoded straight from its own data).
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def encode(value: Mapping[str, Any]) -> str:
    """Compact JSON; anything JSON or UTF-8 cannot hold is a ``StoreValueError`` before any write.

    A lone surrogate in a string is valid in Python but not in UTF-8, which every database
    needs: refused here, so every backend refuses it the same way.
    """
    try:
        text = json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_as_dict
        )
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreValueError(f"value holds text that is not valid Unicode: {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise StoreValueError(f"value is not JSON-serializable: {exc}") from exc
    return text


def check_blob(blob: object) -> str:
    """``blob`` if it is text every backend can keep, else ``StoreValueError`` before any write.

    A NUL character (PostgreSQL's ``text`` refuses it) and a lone surrogate (not UTF-8) are
    refused by every backend alike.
    """
    if not isinstance(blob, str):
        raise StoreValueError(f"a run state is stored as text, got {type(blob).__name__}")
    if "\x00" in blob:
        raise StoreValueError("a stored blob cannot hold a NUL character")
    try:
        blob.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreValueError(f"a stored blob must be valid Unicode text: {exc}") from exc
    return blob


def decode(text: str) -> dict[str, Any]:
    """A stored JSON object; ``StoredDataError`` for what is not one (the store's data, not
    the caller's, is wrong)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StoredDataError(f"stored value is not valid JSON: {str(text)[:80]!r}") from exc
    if not isinstance(value, dict):
        raise StoredDataError("stored value is not a JSON object")
    return value


def encode_nodes(nodes: Iterable[Node]) -> list[tuple[str, str | None, str]]:
    """``(id, parent_id, json)`` per node; a repeated id keeps its last version."""
    rows: dict[str, tuple[str, str | None, str]] = {}
    for node in nodes:
        check_id(node.id, "node id")
        if node.parent_id is not None:
            check_id(node.parent_id, "node id")
        rows[node.id] = (node.id, node.parent_id, encode_node(node))
    return list(rows.values())


def encode_node(node: Node) -> str:
    """The stored JSON of ``node``: the text of ``encode(node.to_dict())``, without its copy.

    Encoded straight from the node's own items and meta (the caller hands the store nodes
    nobody changes while it encodes; the chat layer copies them once, for that).
    """
    return encode(
        {
            "id": node.id,
            "parent_id": node.parent_id,
            "role": node.role,
            "status": node.status,
            "items": node.items,
            "attempt_id": node.attempt_id,
            "request_id": node.request_id,
            "created_at": node.created_at,
            "meta": node.meta,
        }
    )


def decode_node(text: str) -> Node:
    try:
        return Node.from_dict(decode(text))
    except GraphError as exc:  # a field of the wrong type: the store's data, not the caller's
        raise StoredDataError(f"stored node is malformed: {exc}") from exc


def encode_attempt(record: AttemptRecord) -> str:
    return encode(record.to_dict())


def decode_attempt(text: str) -> AttemptRecord:
    try:
        return AttemptRecord.from_dict(decode(text))
    except RecordError as exc:
        raise StoredDataError(f"stored attempt record is malformed: {exc}") from exc


def start_order(started_at: float | None, seq: int) -> tuple[bool, float, int]:
    """Sort key of attempts: by start time, unset times last, ties in first-write order."""
    return (started_at is None, started_at or 0.0, seq)


def missing_conversation(conversation_id: str) -> ConversationNotFoundError:
    return ConversationNotFoundError(f"no conversation {conversation_id!r}")


def missing_node(conversation_id: str, node_id: str) -> NodeNotFoundError:
    return NodeNotFoundError(f"no node {node_id!r} in conversation {conversation_id!r}")


def missing_parent(conversation_id: str, node_id: str, parent_id: str) -> NodeNotFoundError:
    """A commit wrote ``node_id`` under ``parent_id``, which neither the store nor it holds."""
    return NodeNotFoundError(
        f"no node {parent_id!r} in conversation {conversation_id!r}: it is the parent of node "
        f"{node_id!r}, which a commit must write with its parent or after it"
    )


def unknown_parents(rows: Sequence[tuple[Any, ...]]) -> dict[str, str]:
    """parent id -> the first node written under it, for parents the rows do not write."""
    written = {row[0] for row in rows}
    out: dict[str, str] = {}
    for row in rows:
        parent = row[1]
        if parent is not None and parent not in written:
            out.setdefault(parent, row[0])
    return out


def check_id(value: object, what: str) -> str:
    """``value`` if it is non-empty text that any backend can store, else ``StoreValueError``.

    A lone surrogate cannot be encoded as UTF-8 (SQLite, PostgreSQL and Redis all need it);
    a NUL byte is refused by PostgreSQL. Both are refused by every backend, before any write.
    """
    if not isinstance(value, str):
        raise StoreValueError(f"a {what} is text, got {type(value).__name__}")
    if not value:
        raise StoreValueError(f"a {what} cannot be empty")
    if "\x00" in value:
        raise StoreValueError(f"a {what} cannot hold a NUL character: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreValueError(f"a {what} must be valid Unicode text: {value!r}") from exc
    return value


def check_limit(limit: object) -> int | None:
    """``limit`` if it is ``None`` or a positive int, else ``StoreValueError``."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise StoreValueError(f"limit must be a positive integer or None, got {limit!r}")
    return limit


def check_counts(encoding: object, counts: Mapping[str, int]) -> dict[str, int]:
    """Token counts checked before any write: text ids, non-negative int counts."""
    check_id(encoding, "encoding")
    checked: dict[str, int] = {}
    for node_id, count in counts.items():
        check_id(node_id, "node id")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise StoreValueError(
                f"a token count is a non-negative int, got {count!r} for {node_id}"
            )
        checked[node_id] = count
    return checked


def graph_of(conversation_id: str, nodes: Iterable[Node], head: str | None) -> ConversationGraph:
    """The graph of stored nodes; a stored graph that is not a tree is ``StoredDataError``."""
    try:
        return ConversationGraph.from_nodes(
            nodes, conversation_id=conversation_id, active_leaf=head
        )
    except GraphError as exc:
        raise StoredDataError(
            f"conversation {conversation_id!r}: stored graph is broken: {exc}"
        ) from exc


def broken_chain(conversation_id: str, node_id: str) -> StoreError:
    return StoredDataError(
        f"conversation {conversation_id!r}: broken parent chain at {node_id!r}"
        " (a missing parent or a cycle)"
    )


def ledger_conflict(key: str, stored: int, expected: int) -> ConcurrentUpdateError:
    return ConcurrentUpdateError(
        f"ledger {key!r} is at version {stored}, expected {expected}: another worker wrote it"
    )


def check_fence(fence: object) -> tuple[str, int] | None:
    """The ``(key, token)`` of a commit's fence, checked; ``None`` for no fence."""
    if fence is None:
        return None
    if not hasattr(fence, "key") or not hasattr(fence, "token"):
        raise StoreError(f"fence must be a Fence, got {type(fence).__name__}")
    token = check_version(fence.token)
    if token == 0:
        raise StoreError("a fence's token is the version of a stored ledger record: 1 or more")
    return check_id(fence.key, "fence key"), token


def fenced_out(key: str, stored: int | None, token: int) -> FencedOutError:
    """The error of a commit whose fence moved on (``stored``: the record's version, if any)."""
    now = "is gone" if stored is None else f"is at version {stored}"
    return FencedOutError(
        f"fence {key!r} {now}, not {token}: the writer lost its lease; nothing was written"
    )


NodeRow = tuple[str, str | None, str, str, str]
"""A node as stored in columns: ``(id, parent_id, role, status, json)``."""


def encode_node_rows(nodes: Iterable[Node]) -> list[NodeRow]:
    """``(id, parent_id, role, status, json)`` per node, ids checked; a repeated id: its last."""
    rows: dict[str, NodeRow] = {}
    for node in nodes:
        check_id(node.id, "node id")
        if node.parent_id is not None:
            check_id(node.parent_id, "node id")
        rows[node.id] = (node.id, node.parent_id, node.role, node.status, encode_node(node))
    return list(rows.values())


def attempt_row(record: AttemptRecord) -> tuple[str, str, float | None, str]:
    """``(attempt_id, message_id, started_at, json)`` of a record, its ids checked first."""
    check_id(record.attempt_id, "attempt id")
    check_id(record.message_id, "message id")
    return record.attempt_id, record.message_id, record.started_at, encode_attempt(record)


def check_version(value: object) -> int:
    """An expected ledger version: a non-negative int (0: none stored yet), else ``StoreError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreError(f"a ledger version is a non-negative int, got {value!r}")
    return value


def check_hold(holder: object, held_until: object) -> tuple[str | None, float | None]:
    """A ledger's holder (text or ``None``) and lease end (finite seconds or ``None``)."""
    checked = None if holder is None else check_id(holder, "ledger holder")
    if held_until is None:
        return checked, None
    if isinstance(held_until, bool) or not isinstance(held_until, (int, float)):
        raise StoreError(f"held_until is Unix seconds or None, got {held_until!r}")
    if not math.isfinite(held_until):
        raise StoreError(f"held_until must be finite, got {held_until!r}")
    return checked, float(held_until)


# The decoder's scanner (the C one when available), without json.loads' wrappers.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def decode_nodes(texts: Iterable[str]) -> list[Node]:
    """Nodes from their stored JSON, in order: the fast path for whole paths and graphs.

    Each text goes straight to the C scanner (``json.loads`` adds two Python calls and two
    regex matches per row), and each ``Node`` is built positionally, without
    ``Node.from_dict``'s copies: the decoded dicts are new and shared with nothing.
    """
    with _collector_paused():
        return _decode_nodes(texts)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a bulk decode allocates.

    Decoding a long path allocates tens of thousands of acyclic containers (each node, its
    items, their content parts), and every few hundred of them the collector would walk the
    whole heap again: with a large heap that is most of a 10k-message load (measured: 42 ms
    paused against 50 to 300 ms not). Nothing a decode makes is cyclic, so nothing is left for
    the collector. Re-enabled only if it was enabled, so a caller's own ``gc.disable()`` holds.
    """
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _decode_nodes(texts: Iterable[str]) -> list[Node]:
    nodes: list[Node] = []
    append, scan = nodes.append, _scan_json
    for text in texts:
        try:
            data, end = scan(text, 0)
        except (StopIteration, ValueError) as exc:
            raise StoredDataError(f"stored node is not valid JSON: {text[:80]!r}") from exc
        if not isinstance(data, dict) or (end != len(text) and text[end:].strip()):
            raise StoredDataError(f"stored node is not a JSON object: {text[:80]!r}")
        try:
            check_node_fields(data)  # what follows trusts the types (a view iterates items)
            node = Node(
                data["id"],
                data.get("parent_id"),
                data["role"],
                data["status"],
                data.get("items") or [],
                data.get("attempt_id"),
                data.get("request_id"),
                float(data.get("created_at") or 0.0),
                data.get("meta") or {},
            )
        except GraphError as exc:
            raise StoredDataError(f"stored node is malformed: {exc}") from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise StoredDataError(f"stored node lacks {exc}: {text[:80]!r}") from exc
        append(node)
    return nodes
