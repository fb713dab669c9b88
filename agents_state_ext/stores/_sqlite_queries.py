"""What each :class:`~agents_state_ext.stores.SQLiteStore` method does on the database.

One function per store method, given the worker thread's connection and the method's checked
arguments; the worker runs each in its own transaction (``BEGIN IMMEDIATE`` for a write, one
snapshot for a read). The store itself checks the arguments and hands these to the worker.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import ConcurrentUpdateError, StoreError
from . import _codec
from ._sqlite_schema import (
    PATH_ALL,
    PATH_LAST,
    UPSERT_ATTEMPT,
    UPSERT_LEDGER,
    UPSERT_TOKENS,
    check_chain,
    check_parents,
    read_head,
    write_nodes,
)
from .base import AttemptNotFoundError, ConversationInfo, LedgerRecord

__all__ = [
    "active_path",
    "commit",
    "create_conversation",
    "delete_conversation",
    "delete_ledger",
    "delete_run_state",
    "get_attempt",
    "get_conversation",
    "get_ledger",
    "get_node",
    "get_run_state",
    "get_token_counts",
    "list_attempts",
    "list_conversations",
    "load_graph",
    "put_attempt",
    "put_ledger",
    "put_run_state",
    "put_token_counts",
    "update_conversation_meta",
]

_DEPTH = itemgetter(0)

# -- conversations ---------------------------------------------------------------------------


def create_conversation(
    conn: sqlite3.Connection, row: tuple[str, str, str], clock: Callable[[], float]
) -> None:
    cur = conn.execute(
        "INSERT INTO conversations (id, strategy, meta, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (id) DO NOTHING",
        (*row, clock()),
    )
    if cur.rowcount == 0:
        raise StoreError(f"conversation {row[0]!r} already exists")


def get_conversation(conn: sqlite3.Connection, cid: str) -> ConversationInfo:
    row = conn.execute(
        "SELECT strategy, meta, created_at FROM conversations WHERE id = ?", (cid,)
    ).fetchone()
    if row is None:
        raise _codec.missing_conversation(cid)
    return ConversationInfo(cid, row[0], _codec.decode(row[1]), row[2])


def list_conversations(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM conversations ORDER BY seq")]


def update_conversation_meta(conn: sqlite3.Connection, cid: str, update: dict[str, Any]) -> None:
    row = conn.execute("SELECT meta FROM conversations WHERE id = ?", (cid,)).fetchone()
    if row is None:
        raise _codec.missing_conversation(cid)
    merged = _codec.encode({**_codec.decode(row[0]), **update})
    conn.execute("UPDATE conversations SET meta = ? WHERE id = ?", (merged, cid))


def delete_conversation(conn: sqlite3.Connection, cid: str) -> None:
    read_head(conn, cid)
    for table in ("token_counts", "run_states", "attempts", "nodes"):
        conn.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (cid,))
    conn.execute("DELETE FROM conversations WHERE id = ?", (cid,))
    conn.execute("DELETE FROM ledgers WHERE key = ?", (cid,))


# -- nodes and heads -------------------------------------------------------------------------


def get_node(conn: sqlite3.Connection, cid: str, nid: str) -> Node:
    row = conn.execute(
        "SELECT data FROM nodes WHERE conversation_id = ? AND id = ?", (cid, nid)
    ).fetchone()
    if row is None:
        read_head(conn, cid)
        raise _codec.missing_node(cid, nid)
    return _codec.decode_nodes([row[0]])[0]


def load_graph(conn: sqlite3.Connection, cid: str) -> ConversationGraph:
    head = read_head(conn, cid)
    rows = conn.execute(
        "SELECT data FROM nodes WHERE conversation_id = ? ORDER BY seq", (cid,)
    ).fetchall()
    return _codec.graph_of(cid, _codec.decode_nodes([r[0] for r in rows]), head)


def active_path(conn: sqlite3.Connection, params: Mapping[str, Any]) -> list[Node]:
    last, cid, leaf = params["limit"], params["cid"], params["leaf"]
    rows = conn.execute(PATH_ALL if last is None else PATH_LAST, params).fetchall()
    if not rows:
        # Only an empty answer needs a second look: which of the three reasons?
        head = read_head(conn, cid)
        if leaf is not None or head is not None:
            raise _codec.missing_node(cid, leaf or str(head))
        return []
    rows.sort(key=_DEPTH, reverse=True)
    check_chain(cid, rows, last)
    return _codec.decode_nodes([r[4] for r in rows])


def commit(
    conn: sqlite3.Connection,
    cid: str,
    rows: list[_codec.NodeRow],
    records: Sequence[tuple[Any, ...]],
    heads: tuple[str | None, str | None],
    parents: dict[str, str],
    fenced: tuple[str, int] | None,
) -> None:
    expected_head, new_head = heads
    if fenced is not None:  # BEGIN IMMEDIATE: no other writer until this one ends
        key, token = fenced
        row = conn.execute("SELECT version FROM ledgers WHERE key = ?", (key,)).fetchone()
        if row is None or row[0] != token:
            raise _codec.fenced_out(key, None if row is None else row[0], token)
    head = read_head(conn, cid)
    if head != expected_head:
        raise ConcurrentUpdateError(
            f"conversation {cid!r}: head is {head!r}, expected {expected_head!r}"
        )
    check_parents(conn, cid, parents)
    write_nodes(conn, cid, rows)
    if new_head is not None and new_head not in {row[0] for row in rows}:
        found = conn.execute(
            "SELECT 1 FROM nodes WHERE conversation_id = ? AND id = ?", (cid, new_head)
        ).fetchone()
        if found is None:
            raise _codec.missing_node(cid, new_head)
    conn.executemany(UPSERT_ATTEMPT, records)
    if new_head != head:
        conn.execute("UPDATE conversations SET head = ? WHERE id = ?", (new_head, cid))


# -- attempts --------------------------------------------------------------------------------


def put_attempt(conn: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    read_head(conn, row[0])
    conn.execute(UPSERT_ATTEMPT, row)


def get_attempt(conn: sqlite3.Connection, cid: str, aid: str) -> AttemptRecord:
    row = conn.execute(
        "SELECT data FROM attempts WHERE conversation_id = ? AND attempt_id = ?",
        (cid, aid),
    ).fetchone()
    if row is None:
        read_head(conn, cid)
        raise AttemptNotFoundError(f"no attempt {aid!r} in conversation {cid!r}")
    return _codec.decode_attempt(row[0])


def list_attempts(
    conn: sqlite3.Connection, cid: str, sql: str, args: tuple[str, ...]
) -> list[AttemptRecord]:
    rows = conn.execute(sql, args).fetchall()
    if not rows:
        read_head(conn, cid)
    return [_codec.decode_attempt(r[0]) for r in rows]


# -- paused runs -----------------------------------------------------------------------------


def put_run_state(
    conn: sqlite3.Connection, row: tuple[str, str, str], clock: Callable[[], float]
) -> None:
    read_head(conn, row[0])
    conn.execute(
        "INSERT INTO run_states (conversation_id, attempt_id, data, updated_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET"
        " data = excluded.data, updated_at = excluded.updated_at",
        (*row, clock()),
    )


def get_run_state(conn: sqlite3.Connection, cid: str, aid: str) -> str | None:
    found = conn.execute(
        "SELECT data FROM run_states WHERE conversation_id = ? AND attempt_id = ?",
        (cid, aid),
    ).fetchone()
    if found is None:
        read_head(conn, cid)
        return None
    data: str = found[0]
    return data


def delete_run_state(conn: sqlite3.Connection, cid: str, aid: str) -> None:
    read_head(conn, cid)
    conn.execute("DELETE FROM run_states WHERE conversation_id = ? AND attempt_id = ?", (cid, aid))


# -- ledger (capability) ---------------------------------------------------------------------


def get_ledger(conn: sqlite3.Connection, key: str) -> LedgerRecord | None:
    row = conn.execute(
        "SELECT blob, version, holder, held_until FROM ledgers WHERE key = ?", (key,)
    ).fetchone()
    return None if row is None else LedgerRecord(row[0], int(row[1]), row[2], row[3])


def put_ledger(
    conn: sqlite3.Connection, key: str, text: str, expected: int, hold: tuple[Any, ...]
) -> int:
    row = conn.execute("SELECT version FROM ledgers WHERE key = ?", (key,)).fetchone()
    stored = 0 if row is None else int(row[0])
    if stored != expected:
        raise _codec.ledger_conflict(key, stored, expected)
    conn.execute(UPSERT_LEDGER, (key, text, stored + 1, *hold))
    return stored + 1


def delete_ledger(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM ledgers WHERE key = ?", (key,))


# -- token counts (capability) ---------------------------------------------------------------


def put_token_counts(
    conn: sqlite3.Connection, cid: str, rows: Sequence[tuple[str, str, str, int]]
) -> None:
    read_head(conn, cid)
    conn.executemany(UPSERT_TOKENS, rows)


def get_token_counts(
    conn: sqlite3.Connection, cid: str, sql: str, args: tuple[str, ...]
) -> dict[str, int]:
    rows = conn.execute(sql, args).fetchall()
    if not rows:
        read_head(conn, cid)
    return {node_id: int(tokens) for node_id, tokens in rows}
