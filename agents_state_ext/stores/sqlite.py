"""SQLiteStore: the embedded default ConversationStore, on the standard library's ``sqlite3``.

Several processes may share one database file: it runs in WAL mode with a busy timeout, every
write is one ``BEGIN IMMEDIATE`` transaction, and branch heads move by compare-and-set.

Schema versions, one line each (``MIGRATIONS`` applies them in order on open; a database
written by a newer version fails fast with ``StoreError``):

- 1: ``conversations`` (with the branch head), ``nodes``, ``attempts``.
- 2: ``run_states``: the serialized run of an attempt paused for tool approval.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from ..attempts import AttemptRecord
from ..errors import ConcurrentUpdateError, StoreError
from ..graph import ConversationGraph
from ..nodes import Node
from . import _codec
from .base import AttemptNotFoundError, ConversationInfo, ConversationStore

__all__ = ["MIGRATIONS", "SQLiteStore"]

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
]

# One query: walk parent ids up from the leaf (the head unless given). The depth bound only
# stops a corrupted, cyclic parent chain from looping forever. Rows are put root first in
# Python (an already-ordered sort there is linear); an ORDER BY here would copy every row's
# data through a temporary B-tree.
_PATH_SQL = """
WITH RECURSIVE path (parent_id, data, depth) AS (
    SELECT parent_id, data, 0 FROM nodes
    WHERE conversation_id = :cid
      AND id = COALESCE(:leaf, (SELECT head FROM conversations WHERE id = :cid))
    UNION ALL
    SELECT n.parent_id, n.data, path.depth + 1
    FROM path JOIN nodes AS n ON n.conversation_id = :cid AND n.id = path.parent_id
    WHERE path.depth < :limit
)
SELECT depth, parent_id, data FROM path
"""
_MAX_DEPTH = 10_000_000

_UPSERT_NODE = """
INSERT INTO nodes (conversation_id, id, parent_id, data) VALUES (?, ?, ?, ?)
ON CONFLICT (conversation_id, id) DO UPDATE SET parent_id = excluded.parent_id, data = excluded.data
"""

_UPSERT_ATTEMPT = """
INSERT INTO attempts (conversation_id, attempt_id, message_id, started_at, data)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET
    message_id = excluded.message_id, started_at = excluded.started_at, data = excluded.data
"""


class SQLiteStore(ConversationStore):
    """A ConversationStore in one SQLite file (or ``":memory:"``), shared safely by processes.

    ``timeout`` is how long, in seconds, a writer waits for another one's lock before
    ``StoreError``. ``clock`` stamps ``created_at``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 5.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._clock = clock or time.time
        self._lock = threading.RLock()
        try:
            conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
            raise
        self._conn: sqlite3.Connection | None = conn

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SQLiteStore:
        """Open ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``sqlite://`` (memory)."""
        prefix = "sqlite://"
        if not url.startswith(prefix) or "?" in url:
            raise StoreError(f"not a SQLite URL (sqlite:///file.db): {url!r}")
        rest = url[len(prefix) :]
        if rest not in ("", "/") and not rest.startswith("/"):
            raise StoreError(f"a SQLite URL has no host: {url!r}")
        return cls(rest[1:] or ":memory:", **kwargs)

    # -- conversations -----------------------------------------------------------------------

    def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        encoded = _codec.encode(dict(meta or {}))
        with self._transaction() as conn:
            cur = conn.execute(
                "INSERT INTO conversations (id, strategy, meta, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (conversation_id, strategy, encoded, self._clock()),
            )
            if cur.rowcount == 0:
                raise StoreError(f"conversation {conversation_id!r} already exists")

    def get_conversation(self, conversation_id: str) -> ConversationInfo:
        with self._transaction(write=False) as conn:
            row = conn.execute(
                "SELECT strategy, meta, created_at FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
        if row is None:
            raise _codec.missing_conversation(conversation_id)
        return ConversationInfo(conversation_id, row[0], _codec.decode(row[1]), row[2])

    def list_conversations(self) -> list[str]:
        with self._transaction(write=False) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM conversations ORDER BY seq")]

    def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT meta FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
            if row is None:
                raise _codec.missing_conversation(conversation_id)
            merged = _codec.encode({**_codec.decode(row[0]), **meta})
            conn.execute(
                "UPDATE conversations SET meta = ? WHERE id = ?", (merged, conversation_id)
            )

    # -- nodes and heads ---------------------------------------------------------------------

    def put_nodes(self, conversation_id: str, nodes: Iterable[Node]) -> None:
        rows = _codec.encode_nodes(nodes)
        with self._transaction() as conn:
            self._read_head(conn, conversation_id)
            conn.executemany(_UPSERT_NODE, [(conversation_id, *row) for row in rows])

    def get_node(self, conversation_id: str, node_id: str) -> Node:
        with self._transaction(write=False) as conn:
            row = conn.execute(
                "SELECT data FROM nodes WHERE conversation_id = ? AND id = ?",
                (conversation_id, node_id),
            ).fetchone()
            if row is None:
                self._read_head(conn, conversation_id)
                raise _codec.missing_node(conversation_id, node_id)
        return _codec.decode_node(row[0])

    def load_graph(self, conversation_id: str) -> ConversationGraph:
        with self._transaction(write=False) as conn:
            conn.execute("BEGIN")  # one snapshot for the head and the nodes
            try:
                head = self._read_head(conn, conversation_id)
                rows = conn.execute(
                    "SELECT data FROM nodes WHERE conversation_id = ? ORDER BY seq",
                    (conversation_id,),
                ).fetchall()
            finally:
                conn.execute("COMMIT")
        nodes = _nodes_from_json([r[0] for r in rows])
        return ConversationGraph.from_nodes(
            nodes, conversation_id=conversation_id, active_leaf=head
        )

    def active_path(self, conversation_id: str, leaf_id: str | None = None) -> list[Node]:
        params = {"cid": conversation_id, "leaf": leaf_id, "limit": _MAX_DEPTH}
        with self._transaction(write=False) as conn:
            rows = conn.execute(_PATH_SQL, params).fetchall()
            if not rows:
                # Only an empty answer needs a second look: which of the three reasons?
                head = self._read_head(conn, conversation_id)
                if leaf_id is not None:
                    raise _codec.missing_node(conversation_id, leaf_id)
                if head is not None:
                    raise _codec.missing_node(conversation_id, head)
                return []
        rows.sort(key=_DEPTH, reverse=True)
        if rows[0][1] is not None:
            raise StoreError(f"conversation {conversation_id!r}: broken parent chain")
        return _nodes_from_json([r[2] for r in rows])

    def get_head(self, conversation_id: str) -> str | None:
        with self._transaction(write=False) as conn:
            return self._read_head(conn, conversation_id)

    def set_head(self, conversation_id: str, new_head: str | None, *, expected: str | None) -> None:
        self.commit(conversation_id, (), expected_head=expected, new_head=new_head)

    def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
    ) -> None:
        rows = _codec.encode_nodes(nodes)
        with self._transaction() as conn:
            head = self._read_head(conn, conversation_id)
            if head != expected_head:
                raise ConcurrentUpdateError(
                    f"conversation {conversation_id!r}: head is {head!r},"
                    f" expected {expected_head!r}"
                )
            conn.executemany(_UPSERT_NODE, [(conversation_id, *row) for row in rows])
            if new_head is not None:
                found = conn.execute(
                    "SELECT 1 FROM nodes WHERE conversation_id = ? AND id = ?",
                    (conversation_id, new_head),
                ).fetchone()
                if found is None:
                    raise _codec.missing_node(conversation_id, new_head)
            conn.execute(
                "UPDATE conversations SET head = ? WHERE id = ?", (new_head, conversation_id)
            )

    # -- attempts ----------------------------------------------------------------------------

    def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        data = _codec.encode_attempt(record)
        row = (conversation_id, record.attempt_id, record.message_id, record.started_at, data)
        with self._transaction() as conn:
            self._read_head(conn, conversation_id)
            conn.execute(_UPSERT_ATTEMPT, row)

    def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        with self._transaction(write=False) as conn:
            row = conn.execute(
                "SELECT data FROM attempts WHERE conversation_id = ? AND attempt_id = ?",
                (conversation_id, attempt_id),
            ).fetchone()
            if row is None:
                self._read_head(conn, conversation_id)
                raise AttemptNotFoundError(
                    f"no attempt {attempt_id!r} in conversation {conversation_id!r}"
                )
        return _codec.decode_attempt(row[0])

    def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        sql = "SELECT data FROM attempts WHERE conversation_id = ?"
        args: tuple[str, ...] = (conversation_id,)
        if message_id is not None:
            sql, args = sql + " AND message_id = ?", (conversation_id, message_id)
        # Same order as _codec.start_order: unset start times last, ties by first write.
        sql += " ORDER BY started_at IS NULL, started_at, seq"
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, args).fetchall()
            if not rows:
                self._read_head(conn, conversation_id)
        return [_codec.decode_attempt(r[0]) for r in rows]

    # -- paused runs -------------------------------------------------------------------------

    def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        row = (conversation_id, attempt_id, _codec.check_blob(blob), self._clock())
        with self._transaction() as conn:
            self._read_head(conn, conversation_id)
            conn.execute(
                "INSERT INTO run_states (conversation_id, attempt_id, data, updated_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET"
                " data = excluded.data, updated_at = excluded.updated_at",
                row,
            )

    def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        with self._transaction(write=False) as conn:
            found = conn.execute(
                "SELECT data FROM run_states WHERE conversation_id = ? AND attempt_id = ?",
                (conversation_id, attempt_id),
            ).fetchone()
            if found is None:
                self._read_head(conn, conversation_id)
                return None
        data: str = found[0]
        return data

    def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        with self._transaction() as conn:
            self._read_head(conn, conversation_id)
            conn.execute(
                "DELETE FROM run_states WHERE conversation_id = ? AND attempt_id = ?",
                (conversation_id, attempt_id),
            )

    # -- plumbing ----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def _transaction(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """The connection, in ``BEGIN IMMEDIATE`` when writing; sqlite3 errors become StoreError.

        IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        writes can fail at once under WAL instead of waiting for the busy timeout.
        """
        with self._lock:
            if self._conn is None:
                raise StoreError("the store is closed")
            conn = self._conn
            try:
                if write:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                if write:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite error on {self.path!r}: {exc}") from exc

    @staticmethod
    def _read_head(conn: sqlite3.Connection, conversation_id: str) -> str | None:
        row = conn.execute(
            "SELECT head FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise _codec.missing_conversation(conversation_id)
        head: str | None = row[0]
        return head


_DEPTH = itemgetter(0)
# The decoder's scanner (the C one when available), without json.loads' wrappers.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _nodes_from_json(texts: list[str]) -> list[Node]:
    """Nodes from their stored JSON, in order, built directly.

    Each text goes straight to the C scanner (``json.loads`` adds two Python calls and two
    regex matches per row), and each ``Node`` is built positionally, without
    ``Node.from_dict``'s copies: the decoded dicts are new and shared with nothing.
    """
    nodes: list[Node] = []
    append, scan = nodes.append, _scan_json
    for text in texts:
        try:
            data, end = scan(text, 0)
        except (StopIteration, ValueError) as exc:
            raise StoreError(f"stored node is not valid JSON: {text[:80]!r}") from exc
        if not isinstance(data, dict) or (end != len(text) and text[end:].strip()):
            raise StoreError(f"stored node is not a JSON object: {text[:80]!r}")
        append(
            Node(
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
        )
    return nodes


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema up to the newest of ``MIGRATIONS``, under the write lock."""
    versions = [v for v, _ in MIGRATIONS]
    if versions != sorted(set(versions)):
        raise StoreError(f"MIGRATIONS must be in strictly increasing order, got {versions}")
    latest = versions[-1] if versions else 0
    if _schema_version(conn) == latest:
        return  # the common case, without taking the write lock
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Checked again under the lock: another process may have migrated in between.
        current = _schema_version(conn)
        if current > latest:
            raise StoreError(
                f"database schema version {current} is newer than this library knows"
                f" ({latest}); upgrade agents-state-ext"
            )
        if current == 0:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version"
                " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
            )
        for version, sql in MIGRATIONS:
            if version > current:
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _schema_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)
