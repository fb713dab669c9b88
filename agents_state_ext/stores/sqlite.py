"""SQLiteStore: the embedded default store, on the standard library's ``sqlite3``.

It never blocks the event loop: every sqlite3 call (and the decoding of what it read) runs on
the store's own worker thread, awaited with ``run_in_executor``, so calls on one store run one
at a time, in order. Several processes may share one database file: it runs in WAL mode with a
busy timeout, every write is one ``BEGIN IMMEDIATE`` transaction, and branch heads and ledgers
move by compare-and-set.

``read_only=True`` opens the file with ``mode=ro``: nothing is created, migrated or switched,
and every write method is ``StoreError`` before any work. Beside a WAL database SQLite still
creates the ``-wal`` and ``-shm`` side files when they are missing, even for a reader: readers
find the newest committed pages through that shared index, which is how they stay consistent
with a writer in another process. Those files hold no data; the database file itself is never
changed. A database at an older schema version is read through temporary tables and views that
exist only on that connection; a newer one is refused.

Schema versions, one line each (``MIGRATIONS`` applies them in order on open; a database
written by a newer version fails fast with ``StoreError``):

- 1: ``conversations`` (with the branch head), ``nodes``, ``attempts``.
- 2: ``run_states``: the serialized run of an attempt paused for tool approval.
- 3: ``ledgers`` (per key: blob, version, holder, lease end), ``token_counts`` (per
  conversation, encoding and node), and on ``nodes`` the ``role`` and ``status`` columns and
  ``parent_seq``, the parent's ``seq``: the integer pointer the path query walks.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..attempts import AttemptRecord
from ..errors import ConcurrentUpdateError, StoreError
from ..graph import ConversationGraph
from ..nodes import Node
from . import _codec
from .base import AttemptNotFoundError, ConversationInfo, LedgerRecord, StoreBase

__all__ = ["MIGRATIONS", "SQLiteStore"]

_T = TypeVar("_T")

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
_PATH_ALL = _PATH_SQL.format(bound="(SELECT COUNT(*) FROM nodes WHERE conversation_id = :cid)")
_PATH_LAST = _PATH_SQL.format(bound=":limit")

_UPSERT_NODE = """
INSERT INTO nodes (conversation_id, id, parent_id, parent_seq, role, status, data)
VALUES (?1, ?2, ?3, (SELECT seq FROM nodes WHERE conversation_id = ?1 AND id = ?3), ?4, ?5, ?6)
ON CONFLICT (conversation_id, id) DO UPDATE SET
    parent_id = excluded.parent_id, parent_seq = excluded.parent_seq, role = excluded.role,
    status = excluded.status, data = excluded.data
"""

# Links the nodes written before their parent (a parent later in the same batch): the partial
# index nodes_unlinked holds only those, so this costs nothing when there are none.
_LINK_PARENTS = """
UPDATE nodes SET parent_seq = (
    SELECT p.seq FROM nodes AS p
    WHERE p.conversation_id = nodes.conversation_id AND p.id = nodes.parent_id
) WHERE conversation_id = ? AND parent_seq IS NULL AND parent_id IS NOT NULL
"""

_UPSERT_ATTEMPT = """
INSERT INTO attempts (conversation_id, attempt_id, message_id, started_at, data)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET
    message_id = excluded.message_id, started_at = excluded.started_at, data = excluded.data
"""

_UPSERT_LEDGER = """
INSERT INTO ledgers (key, blob, version, holder, held_until) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET blob = excluded.blob, version = excluded.version,
    holder = excluded.holder, held_until = excluded.held_until
"""

_UPSERT_TOKENS = """
INSERT INTO token_counts (conversation_id, encoding, node_id, tokens) VALUES (?, ?, ?, ?)
ON CONFLICT (conversation_id, encoding, node_id) DO UPDATE SET tokens = excluded.tokens
"""

# What a read-only connection puts in front of an older schema (temporary: on that connection
# only, shadowing the file's own tables by name), so the current queries read it unchanged.
_STAND_INS = {
    "run_states": "CREATE TEMP TABLE run_states"
    " (conversation_id TEXT, attempt_id TEXT, data TEXT, updated_at REAL)",
    "ledgers": "CREATE TEMP TABLE ledgers"
    " (key TEXT PRIMARY KEY, blob TEXT, version INTEGER, holder TEXT, held_until REAL)",
    "token_counts": "CREATE TEMP TABLE token_counts"
    " (conversation_id TEXT, encoding TEXT, node_id TEXT, tokens INTEGER)",
}
_NODES_STAND_IN = """
CREATE TEMP VIEW nodes AS
SELECT n.seq AS seq, n.conversation_id AS conversation_id, n.id AS id, n.parent_id AS parent_id,
    json_extract(n.data, '$.role') AS role, json_extract(n.data, '$.status') AS status,
    (SELECT p.seq FROM main.nodes AS p
     WHERE p.conversation_id = n.conversation_id AND p.id = n.parent_id) AS parent_seq,
    n.data AS data
FROM main.nodes AS n
"""

_Mode = Literal["read", "snapshot", "write"]
_DEPTH = itemgetter(0)
_DRIVER_ERRORS = (sqlite3.Error, UnicodeEncodeError, OverflowError)


class SQLiteStore(StoreBase):
    """A store in one SQLite file (or ``":memory:"``), shared safely by processes.

    Implements the core protocol and both capabilities (ledger, token counts). ``timeout`` is
    how long, in seconds, a writer waits for another one's lock before ``StoreError``.
    ``clock`` stamps ``created_at``. ``read_only`` opens an existing database without changing
    it (see the module docs). Opening is synchronous and quick; close with ``await aclose()``
    or ``async with``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 5.0,
        clock: Callable[[], float] | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.read_only = read_only
        self._clock = clock or time.time
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="agents-state-ext-sqlite")
        try:
            self._conn = self._executor.submit(self._connect, timeout).result()
        except BaseException:
            self._executor.shutdown(wait=True)  # the worker is done: this only joins it
            raise

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

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, _codec.check_id(strategy, "strategy"), _codec.encode(dict(meta or {})))

        def work(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "INSERT INTO conversations (id, strategy, meta, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (*row, self._clock()),
            )
            if cur.rowcount == 0:
                raise StoreError(f"conversation {cid!r} already exists")

        await self._run("write", work)

    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        cid = _codec.check_id(conversation_id, "conversation id")

        def work(conn: sqlite3.Connection) -> ConversationInfo:
            row = conn.execute(
                "SELECT strategy, meta, created_at FROM conversations WHERE id = ?", (cid,)
            ).fetchone()
            if row is None:
                raise _codec.missing_conversation(cid)
            return ConversationInfo(cid, row[0], _codec.decode(row[1]), row[2])

        return await self._run("read", work)

    async def list_conversations(self) -> list[str]:
        def work(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute("SELECT id FROM conversations ORDER BY seq")]

        return await self._run("read", work)

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        update = dict(meta)
        _codec.encode(update)

        def work(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT meta FROM conversations WHERE id = ?", (cid,)).fetchone()
            if row is None:
                raise _codec.missing_conversation(cid)
            merged = _codec.encode({**_codec.decode(row[0]), **update})
            conn.execute("UPDATE conversations SET meta = ? WHERE id = ?", (merged, cid))

        await self._run("write", work)

    async def delete_conversation(self, conversation_id: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")

        def work(conn: sqlite3.Connection) -> None:
            _read_head(conn, cid)
            for table in ("token_counts", "run_states", "attempts", "nodes"):
                conn.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (cid,))
            conn.execute("DELETE FROM conversations WHERE id = ?", (cid,))
            conn.execute("DELETE FROM ledgers WHERE key = ?", (cid,))

        await self._run("write", work)

    # -- nodes and heads ---------------------------------------------------------------------

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        cid = _codec.check_id(conversation_id, "conversation id")
        nid = _codec.check_id(node_id, "node id")

        def work(conn: sqlite3.Connection) -> Node:
            row = conn.execute(
                "SELECT data FROM nodes WHERE conversation_id = ? AND id = ?", (cid, nid)
            ).fetchone()
            if row is None:
                _read_head(conn, cid)
                raise _codec.missing_node(cid, nid)
            return _codec.decode_nodes([row[0]])[0]

        return await self._run("read", work)

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        cid = _codec.check_id(conversation_id, "conversation id")

        def work(conn: sqlite3.Connection) -> ConversationGraph:
            head = _read_head(conn, cid)
            rows = conn.execute(
                "SELECT data FROM nodes WHERE conversation_id = ? ORDER BY seq", (cid,)
            ).fetchall()
            return _codec.graph_of(cid, _codec.decode_nodes([r[0] for r in rows]), head)

        return await self._run("snapshot", work)  # one snapshot for the head and the nodes

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        cid = _codec.check_id(conversation_id, "conversation id")
        leaf = None if leaf_id is None else _codec.check_id(leaf_id, "node id")
        last = _codec.check_limit(limit)
        params = {"cid": cid, "leaf": leaf, "limit": last}

        def work(conn: sqlite3.Connection) -> list[Node]:
            rows = conn.execute(_PATH_ALL if last is None else _PATH_LAST, params).fetchall()
            if not rows:
                # Only an empty answer needs a second look: which of the three reasons?
                head = _read_head(conn, cid)
                if leaf is not None or head is not None:
                    raise _codec.missing_node(cid, leaf or str(head))
                return []
            rows.sort(key=_DEPTH, reverse=True)
            _check_chain(cid, rows, last)
            return _codec.decode_nodes([r[4] for r in rows])

        return await self._run("read", work)

    async def get_head(self, conversation_id: str) -> str | None:
        cid = _codec.check_id(conversation_id, "conversation id")
        return await self._run("read", lambda conn: _read_head(conn, cid))

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        rows = _codec.encode_node_rows(nodes)
        records = [(cid, *_codec.attempt_row(record)) for record in attempts]
        for head_id in (expected_head, new_head):
            if head_id is not None:
                _codec.check_id(head_id, "node id")
        written = {row[0] for row in rows}

        def work(conn: sqlite3.Connection) -> None:
            head = _read_head(conn, cid)
            if head != expected_head:
                raise ConcurrentUpdateError(
                    f"conversation {cid!r}: head is {head!r}, expected {expected_head!r}"
                )
            _write_nodes(conn, cid, rows)
            if new_head is not None and new_head not in written:
                found = conn.execute(
                    "SELECT 1 FROM nodes WHERE conversation_id = ? AND id = ?", (cid, new_head)
                ).fetchone()
                if found is None:
                    raise _codec.missing_node(cid, new_head)
            conn.executemany(_UPSERT_ATTEMPT, records)
            if new_head != head:
                conn.execute("UPDATE conversations SET head = ? WHERE id = ?", (new_head, cid))

        await self._run("write", work)

    # -- attempts ----------------------------------------------------------------------------

    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, *_codec.attempt_row(record))

        def work(conn: sqlite3.Connection) -> None:
            _read_head(conn, cid)
            conn.execute(_UPSERT_ATTEMPT, row)

        await self._run("write", work)

    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")

        def work(conn: sqlite3.Connection) -> AttemptRecord:
            row = conn.execute(
                "SELECT data FROM attempts WHERE conversation_id = ? AND attempt_id = ?",
                (cid, aid),
            ).fetchone()
            if row is None:
                _read_head(conn, cid)
                raise AttemptNotFoundError(f"no attempt {aid!r} in conversation {cid!r}")
            return _codec.decode_attempt(row[0])

        return await self._run("read", work)

    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        cid = _codec.check_id(conversation_id, "conversation id")
        sql = "SELECT data FROM attempts WHERE conversation_id = ?"
        args: tuple[str, ...] = (cid,)
        if message_id is not None:
            sql, args = (
                sql + " AND message_id = ?",
                (cid, _codec.check_id(message_id, "message id")),
            )
        # Same order as _codec.start_order: unset start times last, ties by first write.
        sql += " ORDER BY started_at IS NULL, started_at, seq"

        def work(conn: sqlite3.Connection) -> list[AttemptRecord]:
            rows = conn.execute(sql, args).fetchall()
            if not rows:
                _read_head(conn, cid)
            return [_codec.decode_attempt(r[0]) for r in rows]

        return await self._run("read", work)

    # -- paused runs -------------------------------------------------------------------------

    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, _codec.check_id(attempt_id, "attempt id"), _codec.check_blob(blob))

        def work(conn: sqlite3.Connection) -> None:
            _read_head(conn, cid)
            conn.execute(
                "INSERT INTO run_states (conversation_id, attempt_id, data, updated_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET"
                " data = excluded.data, updated_at = excluded.updated_at",
                (*row, self._clock()),
            )

        await self._run("write", work)

    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")

        def work(conn: sqlite3.Connection) -> str | None:
            found = conn.execute(
                "SELECT data FROM run_states WHERE conversation_id = ? AND attempt_id = ?",
                (cid, aid),
            ).fetchone()
            if found is None:
                _read_head(conn, cid)
                return None
            data: str = found[0]
            return data

        return await self._run("read", work)

    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")

        def work(conn: sqlite3.Connection) -> None:
            _read_head(conn, cid)
            conn.execute(
                "DELETE FROM run_states WHERE conversation_id = ? AND attempt_id = ?", (cid, aid)
            )

        await self._run("write", work)

    # -- ledger (capability) -----------------------------------------------------------------

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        checked = _codec.check_id(key, "ledger key")

        def work(conn: sqlite3.Connection) -> LedgerRecord | None:
            row = conn.execute(
                "SELECT blob, version, holder, held_until FROM ledgers WHERE key = ?", (checked,)
            ).fetchone()
            return None if row is None else LedgerRecord(row[0], int(row[1]), row[2], row[3])

        return await self._run("read", work)

    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        checked = _codec.check_id(key, "ledger key")
        text = _codec.check_blob(blob)
        expected = _codec.check_version(expected_version)
        hold = _codec.check_hold(holder, held_until)

        def work(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT version FROM ledgers WHERE key = ?", (checked,)).fetchone()
            stored = 0 if row is None else int(row[0])
            if stored != expected:
                raise _codec.ledger_conflict(checked, stored, expected)
            conn.execute(_UPSERT_LEDGER, (checked, text, stored + 1, *hold))
            return stored + 1

        return await self._run("write", work)

    async def delete_ledger(self, key: str) -> None:
        checked = _codec.check_id(key, "ledger key")

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM ledgers WHERE key = ?", (checked,))

        await self._run("write", work)

    # -- token counts (capability) -----------------------------------------------------------

    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        checked = _codec.check_counts(encoding, counts)
        rows = [(cid, encoding, node_id, tokens) for node_id, tokens in checked.items()]

        def work(conn: sqlite3.Connection) -> None:
            _read_head(conn, cid)
            conn.executemany(_UPSERT_TOKENS, rows)

        await self._run("write", work)

    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        cid = _codec.check_id(conversation_id, "conversation id")
        enc = _codec.check_id(encoding, "encoding")
        sql = "SELECT node_id, tokens FROM token_counts WHERE conversation_id = ? AND encoding = ?"
        args: tuple[str, ...] = (cid, enc)
        if node_ids is not None:
            wanted = [_codec.check_id(node_id, "node id") for node_id in node_ids]
            sql += " AND node_id IN (SELECT value FROM json_each(?))"
            args = (cid, enc, json.dumps(wanted))

        def work(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(sql, args).fetchall()
            if not rows:
                _read_head(conn, cid)
            return {node_id: int(tokens) for node_id, tokens in rows}

        return await self._run("read", work)

    # -- plumbing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread; calling it twice is fine."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._disconnect)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        self._executor.shutdown(wait=True)  # the worker is idle now: this only joins it

    async def _run(self, mode: _Mode, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work(connection)`` on the worker thread, in a transaction as ``mode`` says."""
        if self._closed:
            raise StoreError("the store is closed")
        if mode == "write" and self.read_only:
            raise StoreError(f"SQLite database {self.path!r} is open read-only")
        try:
            future = asyncio.get_running_loop().run_in_executor(
                self._executor, self._transact, mode, work
            )
        except RuntimeError as exc:  # the executor shut down under a concurrent aclose()
            raise StoreError("the store is closed") from exc
        return await future

    def _transact(self, mode: _Mode, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """On the worker thread: ``BEGIN IMMEDIATE`` for writes, one snapshot if asked.

        IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        writes can fail at once under WAL instead of waiting for the busy timeout.
        """
        conn = self._conn
        if conn is None:
            raise StoreError("the store is closed")
        try:
            if mode != "read":
                conn.execute("BEGIN IMMEDIATE" if mode == "write" else "BEGIN")
            try:
                result = work(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if conn.in_transaction:
                conn.execute("COMMIT")
            return result
        except _DRIVER_ERRORS as exc:
            raise StoreError(f"SQLite error on {self.path!r}: {exc}") from exc

    def _connect(self, timeout: float) -> sqlite3.Connection:
        """On the worker thread: open, check and (when writable) migrate the database."""
        if self.read_only:
            if self.path in ("", ":memory:"):
                raise StoreError("a read-only SQLite store needs a database file")
            if not os.path.isfile(self.path):
                raise StoreError(f"SQLite database {self.path!r} does not exist")
            target, uri = Path(self.path).resolve().as_uri() + "?mode=ro", True
        else:
            target, uri = self.path, False
        try:
            conn = sqlite3.connect(target, timeout=timeout, isolation_level=None, uri=uri)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if self.read_only:
                _prepare_read_only(conn, self.path)
            else:
                _refuse_foreign(conn, self.path)
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA foreign_keys = ON")
                _migrate(conn)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
            raise
        return conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _read_head(conn: sqlite3.Connection, conversation_id: str) -> str | None:
    row = conn.execute("SELECT head FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    if row is None:
        raise _codec.missing_conversation(conversation_id)
    head: str | None = row[0]
    return head


def _write_nodes(conn: sqlite3.Connection, cid: str, rows: list[_codec.NodeRow]) -> None:
    if rows:
        conn.executemany(_UPSERT_NODE, [(cid, *row) for row in rows])
        conn.execute(_LINK_PARENTS, (cid,))


def _check_chain(cid: str, rows: list[Any], limit: int | None) -> None:
    """A walked path (root first) must end at a root and visit no node twice.

    A walk cut short by ``limit`` may stop below the root; one bounded by the node count that
    did not reach a root met a missing parent or a cycle.
    """
    if (limit is None or len(rows) < limit) and rows[0][3] is not None:
        raise _codec.broken_chain(cid, rows[0][2])
    if limit is not None and len({row[1] for row in rows}) != len(rows):
        raise _codec.broken_chain(cid, rows[-1][2])


def _latest() -> int:
    versions = [v for v, _ in MIGRATIONS]
    if versions != sorted(set(versions)):
        raise StoreError(f"MIGRATIONS must be in strictly increasing order, got {versions}")
    return versions[-1] if versions else 0


def _names(conn: sqlite3.Connection) -> set[str]:
    """The schema objects of the database file, SQLite's own left out."""
    rows = conn.execute(
        "SELECT name FROM main.sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    )
    return {name for (name,) in rows}


def _refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """A database holding tables but none of ours is another application's: never touch it."""
    names = _names(conn)
    if names and "schema_version" not in names:
        raise StoreError(f"{path!r} is not an agents-state-ext database")


def _prepare_read_only(conn: sqlite3.Connection, path: str) -> None:
    """Check a database opened read-only, and present an older schema as the current one."""
    names = _names(conn)
    if not {"schema_version", "conversations", "nodes", "attempts"} <= names:
        raise StoreError(f"{path!r} is not an agents-state-ext database")
    current, latest = _schema_version(conn), _latest()
    if current > latest:
        raise _newer(current, latest)
    if current == latest:
        return
    conn.execute("PRAGMA temp_store = MEMORY")
    for name, sql in _STAND_INS.items():
        if name not in names:
            conn.execute(sql)
    columns = {row[1] for row in conn.execute("PRAGMA main.table_info(nodes)")}
    if "parent_seq" not in columns:
        conn.execute(_NODES_STAND_IN)


def _newer(current: int, latest: int) -> StoreError:
    return StoreError(
        f"database schema version {current} is newer than this library knows ({latest});"
        " upgrade agents-state-ext"
    )


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema up to the newest of ``MIGRATIONS``, under the write lock."""
    latest = _latest()
    if _schema_version(conn) == latest:
        return  # the common case, without taking the write lock
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Checked again under the lock: another process may have migrated in between.
        current = _schema_version(conn)
        if current > latest:
            raise _newer(current, latest)
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
        "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)
