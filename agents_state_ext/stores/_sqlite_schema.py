"""The SQLite schema: ``MIGRATIONS``, the migration runner, and the SQL the store runs.

Schema versions, one line each (``migrate`` applies them in order on open; a database written
by a newer version fails fast with ``StoreError``):

- 1: ``conversations`` (with the branch head), ``nodes``, ``attempts``.
- 2: ``run_states``: the serialized run of an attempt paused for tool approval.
- 3: ``ledgers`` (per key: blob, version, holder, lease end), ``token_counts`` (per
  conversation, encoding and node), and on ``nodes`` the ``role`` and ``status`` columns and
  ``parent_seq``, the parent's ``seq``: the integer pointer the path query walks.

The runner takes the migrations as an argument: the store passes the ``MIGRATIONS`` of
:mod:`agents_state_ext.stores.sqlite`, which re-exports this list.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ..errors import StoreError
from . import _codec

__all__ = [
    "LINK_PARENTS",
    "MIGRATIONS",
    "PATH_ALL",
    "PATH_LAST",
    "UPSERT_ATTEMPT",
    "UPSERT_LEDGER",
    "UPSERT_NODE",
    "UPSERT_TOKENS",
    "check_chain",
    "check_parents",
    "latest_version",
    "migrate",
    "newer_schema",
    "read_head",
    "schema_version",
    "write_nodes",
]

_CHUNK = 500  # ids per IN (...) list, well under SQLite's bound on query parameters

# (version, SQL), strictly increasing. Statements are split on ";", so none may contain one.
MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE conversations (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            strategy TEXT NOT NULL,
            meta TEXT NOT NULL,
            created_at REAL NOT NULL,
            head TEXT
        );
        CREATE TABLE nodes (
            seq INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            id TEXT NOT NULL,
            parent_id TEXT,
            data TEXT NOT NULL,
            UNIQUE (conversation_id, id)
        );
        CREATE TABLE attempts (
            seq INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            attempt_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            started_at REAL,
            data TEXT NOT NULL,
            UNIQUE (conversation_id, attempt_id)
        );
        CREATE INDEX attempts_by_message ON attempts (conversation_id, message_id)
        """,
    ),
    (
        2,
        """
        CREATE TABLE run_states (
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            attempt_id TEXT NOT NULL,
            data TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, attempt_id)
        )
        """,
    ),
    (
        3,
        """
        ALTER TABLE nodes ADD COLUMN role TEXT;
        ALTER TABLE nodes ADD COLUMN status TEXT;
        ALTER TABLE nodes ADD COLUMN parent_seq INTEGER;
        UPDATE nodes
            SET role = json_extract(data, '$.role'), status = json_extract(data, '$.status');
        UPDATE nodes SET parent_seq = (
            SELECT p.seq FROM nodes AS p
            WHERE p.conversation_id = nodes.conversation_id AND p.id = nodes.parent_id
        ) WHERE parent_id IS NOT NULL;
        CREATE INDEX nodes_unlinked ON nodes (conversation_id)
            WHERE parent_seq IS NULL AND parent_id IS NOT NULL;
        CREATE TABLE ledgers (
            key TEXT PRIMARY KEY,
            blob TEXT NOT NULL,
            version INTEGER NOT NULL,
            holder TEXT,
            held_until REAL
        );
        CREATE TABLE token_counts (
            conversation_id TEXT NOT NULL REFERENCES conversations (id),
            encoding TEXT NOT NULL,
            node_id TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (conversation_id, encoding, node_id)
        ) WITHOUT ROWID
        """,
    ),
]

# One query: walk the integer parent pointers up from the leaf (the head unless given). The
# walk stops after {bound} rows: the node count of the conversation (a longer walk can only be
# a cycle) or the caller's limit. Rows are put root first in Python (sorting rows already in
# reverse order is linear); an ORDER BY here would copy every row's data through a B-tree.
_PATH_SQL = """
WITH RECURSIVE path (depth, seq, id, parent_id, parent_seq, data) AS (
    SELECT 1, seq, id, parent_id, parent_seq, data FROM nodes
    WHERE conversation_id = :cid
      AND id = COALESCE(:leaf, (SELECT head FROM conversations WHERE id = :cid))
    UNION ALL
    SELECT path.depth + 1, n.seq, n.id, n.parent_id, n.parent_seq, n.data
    FROM path JOIN nodes AS n ON n.seq = path.parent_seq
    WHERE path.depth < {bound}
)
SELECT depth, seq, id, parent_id, data FROM path
"""
PATH_ALL = _PATH_SQL.format(bound="(SELECT COUNT(*) FROM nodes WHERE conversation_id = :cid)")
PATH_LAST = _PATH_SQL.format(bound=":limit")

UPSERT_NODE = """
INSERT INTO nodes (conversation_id, id, parent_id, parent_seq, role, status, data)
VALUES (?1, ?2, ?3, (SELECT seq FROM nodes WHERE conversation_id = ?1 AND id = ?3), ?4, ?5, ?6)
ON CONFLICT (conversation_id, id) DO UPDATE SET
    parent_id = excluded.parent_id, parent_seq = excluded.parent_seq, role = excluded.role,
    status = excluded.status, data = excluded.data
"""

# Links the nodes written before their parent (a parent later in the same batch): the partial
# index nodes_unlinked holds only those, so this costs nothing when there are none.
LINK_PARENTS = """
UPDATE nodes SET parent_seq = (
    SELECT p.seq FROM nodes AS p
    WHERE p.conversation_id = nodes.conversation_id AND p.id = nodes.parent_id
) WHERE conversation_id = ? AND parent_seq IS NULL AND parent_id IS NOT NULL
"""

UPSERT_ATTEMPT = """
INSERT INTO attempts (conversation_id, attempt_id, message_id, started_at, data)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET
    message_id = excluded.message_id, started_at = excluded.started_at, data = excluded.data
"""

UPSERT_LEDGER = """
INSERT INTO ledgers (key, blob, version, holder, held_until) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET blob = excluded.blob, version = excluded.version,
    holder = excluded.holder, held_until = excluded.held_until
"""

UPSERT_TOKENS = """
INSERT INTO token_counts (conversation_id, encoding, node_id, tokens) VALUES (?, ?, ?, ?)
ON CONFLICT (conversation_id, encoding, node_id) DO UPDATE SET tokens = excluded.tokens
"""


def read_head(conn: sqlite3.Connection, conversation_id: str) -> str | None:
    """The head of the conversation; ``ConversationNotFoundError`` if there is none such."""
    row = conn.execute("SELECT head FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    if row is None:
        raise _codec.missing_conversation(conversation_id)
    head: str | None = row[0]
    return head


def check_parents(conn: sqlite3.Connection, cid: str, parents: dict[str, str]) -> None:
    """``NodeNotFoundError`` unless every parent (id -> a node under it) is stored."""
    ids = list(parents)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found = {
            row[0]
            for row in conn.execute(
                f"SELECT id FROM nodes WHERE conversation_id = ? AND id IN ({marks})",
                (cid, *chunk),
            )
        }
        for parent in chunk:
            if parent not in found:
                raise _codec.missing_parent(cid, parents[parent], parent)


def write_nodes(conn: sqlite3.Connection, cid: str, rows: list[_codec.NodeRow]) -> None:
    """Upsert the encoded nodes, then link those written before their parent."""
    if rows:
        conn.executemany(UPSERT_NODE, [(cid, *row) for row in rows])
        conn.execute(LINK_PARENTS, (cid,))


def check_chain(cid: str, rows: list[Any], limit: int | None) -> None:
    """A walked path (root first) must end at a root and visit no node twice.

    A walk cut short by ``limit`` may stop below the root; one bounded by the node count that
    did not reach a root met a missing parent or a cycle.
    """
    if (limit is None or len(rows) < limit) and rows[0][3] is not None:
        raise _codec.broken_chain(cid, rows[0][2])
    if limit is not None and len({row[1] for row in rows}) != len(rows):
        raise _codec.broken_chain(cid, rows[-1][2])


def latest_version(migrations: Sequence[tuple[int, str]]) -> int:
    """The newest version of ``migrations``; ``StoreError`` unless strictly increasing."""
    versions = [v for v, _ in migrations]
    if versions != sorted(set(versions)):
        raise StoreError(f"MIGRATIONS must be in strictly increasing order, got {versions}")
    return versions[-1] if versions else 0


def newer_schema(current: int, latest: int) -> StoreError:
    """The error for a database written by a newer version of the library."""
    return StoreError(
        f"database schema version {current} is newer than this library knows ({latest});"
        " upgrade agents-state-ext"
    )


def migrate(conn: sqlite3.Connection, migrations: Sequence[tuple[int, str]]) -> None:
    """Bring the schema up to the newest of ``migrations``, under the write lock."""
    latest = latest_version(migrations)
    if schema_version(conn) == latest:
        return  # the common case, without taking the write lock
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Checked again under the lock: another process may have migrated in between.
        current = schema_version(conn)
        if current > latest:
            raise newer_schema(current, latest)
        if current == 0:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version"
                " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
            )
        for version, sql in migrations:
            if version > current:
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def schema_version(conn: sqlite3.Connection) -> int:
    """The version recorded in the database file; 0 for a database without our tables."""
    exists = conn.execute(
        "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)
