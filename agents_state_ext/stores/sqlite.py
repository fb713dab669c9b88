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

The schema versions in ``MIGRATIONS`` (their changelog is beside them, in ``_sqlite_schema``)
are applied in order on open; a database written by a newer version fails fast with
``StoreError``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import ConcurrentUpdateError, StoreError
from . import _codec
from ._sqlite_schema import (
    MIGRATIONS,
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
from ._sqlite_worker import SQLiteWorker
from .base import AttemptNotFoundError, ConversationInfo, Fence, LedgerRecord, StoreBase

__all__ = ["MIGRATIONS", "SQLiteStore"]

_DEPTH = itemgetter(0)


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
        # MIGRATIONS is read here, at open, so that it can be replaced on this module.
        self._worker = SQLiteWorker(
            self.path, timeout=timeout, read_only=read_only, migrations=MIGRATIONS
        )
        self._executor = self._worker.executor  # bench/ profiles the store's own thread

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

        await self._worker.run("write", work)

    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        cid = _codec.check_id(conversation_id, "conversation id")

        def work(conn: sqlite3.Connection) -> ConversationInfo:
            row = conn.execute(
                "SELECT strategy, meta, created_at FROM conversations WHERE id = ?", (cid,)
            ).fetchone()
            if row is None:
                raise _codec.missing_conversation(cid)
            return ConversationInfo(cid, row[0], _codec.decode(row[1]), row[2])

        return await self._worker.run("read", work)

    async def list_conversations(self) -> list[str]:
        def work(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute("SELECT id FROM conversations ORDER BY seq")]

        return await self._worker.run("read", work)

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

        await self._worker.run("write", work)

    async def delete_conversation(self, conversation_id: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")

        def work(conn: sqlite3.Connection) -> None:
            read_head(conn, cid)
            for table in ("token_counts", "run_states", "attempts", "nodes"):
                conn.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (cid,))
            conn.execute("DELETE FROM conversations WHERE id = ?", (cid,))
            conn.execute("DELETE FROM ledgers WHERE key = ?", (cid,))

        await self._worker.run("write", work)

    # -- nodes and heads ---------------------------------------------------------------------

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        cid = _codec.check_id(conversation_id, "conversation id")
        nid = _codec.check_id(node_id, "node id")

        def work(conn: sqlite3.Connection) -> Node:
            row = conn.execute(
                "SELECT data FROM nodes WHERE conversation_id = ? AND id = ?", (cid, nid)
            ).fetchone()
            if row is None:
                read_head(conn, cid)
                raise _codec.missing_node(cid, nid)
            return _codec.decode_nodes([row[0]])[0]

        return await self._worker.run("read", work)

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        cid = _codec.check_id(conversation_id, "conversation id")

        def work(conn: sqlite3.Connection) -> ConversationGraph:
            head = read_head(conn, cid)
            rows = conn.execute(
                "SELECT data FROM nodes WHERE conversation_id = ? ORDER BY seq", (cid,)
            ).fetchall()
            return _codec.graph_of(cid, _codec.decode_nodes([r[0] for r in rows]), head)

        return await self._worker.run("snapshot", work)  # one snapshot for the head and the nodes

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        cid = _codec.check_id(conversation_id, "conversation id")
        leaf = None if leaf_id is None else _codec.check_id(leaf_id, "node id")
        last = _codec.check_limit(limit)
        params = {"cid": cid, "leaf": leaf, "limit": last}

        def work(conn: sqlite3.Connection) -> list[Node]:
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

        return await self._worker.run("read", work)

    async def get_head(self, conversation_id: str) -> str | None:
        cid = _codec.check_id(conversation_id, "conversation id")
        return await self._worker.run("read", lambda conn: read_head(conn, cid))

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
        fence: Fence | None = None,
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        rows = _codec.encode_node_rows(nodes)
        records = [(cid, *_codec.attempt_row(record)) for record in attempts]
        for head_id in (expected_head, new_head):
            if head_id is not None:
                _codec.check_id(head_id, "node id")
        written = {row[0] for row in rows}
        parents = _codec.unknown_parents(rows)
        fenced = _codec.check_fence(fence)

        def work(conn: sqlite3.Connection) -> None:
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
            if new_head is not None and new_head not in written:
                found = conn.execute(
                    "SELECT 1 FROM nodes WHERE conversation_id = ? AND id = ?", (cid, new_head)
                ).fetchone()
                if found is None:
                    raise _codec.missing_node(cid, new_head)
            conn.executemany(UPSERT_ATTEMPT, records)
            if new_head != head:
                conn.execute("UPDATE conversations SET head = ? WHERE id = ?", (new_head, cid))

        await self._worker.run("write", work)

    # -- attempts ----------------------------------------------------------------------------

    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, *_codec.attempt_row(record))

        def work(conn: sqlite3.Connection) -> None:
            read_head(conn, cid)
            conn.execute(UPSERT_ATTEMPT, row)

        await self._worker.run("write", work)

    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")

        def work(conn: sqlite3.Connection) -> AttemptRecord:
            row = conn.execute(
                "SELECT data FROM attempts WHERE conversation_id = ? AND attempt_id = ?",
                (cid, aid),
            ).fetchone()
            if row is None:
                read_head(conn, cid)
                raise AttemptNotFoundError(f"no attempt {aid!r} in conversation {cid!r}")
            return _codec.decode_attempt(row[0])

        return await self._worker.run("read", work)

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
                read_head(conn, cid)
            return [_codec.decode_attempt(r[0]) for r in rows]

        return await self._worker.run("read", work)

    # -- paused runs -------------------------------------------------------------------------

    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, _codec.check_id(attempt_id, "attempt id"), _codec.check_blob(blob))

        def work(conn: sqlite3.Connection) -> None:
            read_head(conn, cid)
            conn.execute(
                "INSERT INTO run_states (conversation_id, attempt_id, data, updated_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id, attempt_id) DO UPDATE SET"
                " data = excluded.data, updated_at = excluded.updated_at",
                (*row, self._clock()),
            )

        await self._worker.run("write", work)

    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")

        def work(conn: sqlite3.Connection) -> str | None:
            found = conn.execute(
                "SELECT data FROM run_states WHERE conversation_id = ? AND attempt_id = ?",
                (cid, aid),
            ).fetchone()
            if found is None:
                read_head(conn, cid)
                return None
            data: str = found[0]
            return data

        return await self._worker.run("read", work)

    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")

        def work(conn: sqlite3.Connection) -> None:
            read_head(conn, cid)
            conn.execute(
                "DELETE FROM run_states WHERE conversation_id = ? AND attempt_id = ?", (cid, aid)
            )

        await self._worker.run("write", work)

    # -- ledger (capability) -----------------------------------------------------------------

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        checked = _codec.check_id(key, "ledger key")

        def work(conn: sqlite3.Connection) -> LedgerRecord | None:
            row = conn.execute(
                "SELECT blob, version, holder, held_until FROM ledgers WHERE key = ?", (checked,)
            ).fetchone()
            return None if row is None else LedgerRecord(row[0], int(row[1]), row[2], row[3])

        return await self._worker.run("read", work)

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
            conn.execute(UPSERT_LEDGER, (checked, text, stored + 1, *hold))
            return stored + 1

        return await self._worker.run("write", work)

    async def delete_ledger(self, key: str) -> None:
        checked = _codec.check_id(key, "ledger key")

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM ledgers WHERE key = ?", (checked,))

        await self._worker.run("write", work)

    # -- token counts (capability) -----------------------------------------------------------

    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        checked = _codec.check_counts(encoding, counts)
        rows = [(cid, encoding, node_id, tokens) for node_id, tokens in checked.items()]

        def work(conn: sqlite3.Connection) -> None:
            read_head(conn, cid)
            conn.executemany(UPSERT_TOKENS, rows)

        await self._worker.run("write", work)

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
                read_head(conn, cid)
            return {node_id: int(tokens) for node_id, tokens in rows}

        return await self._worker.run("read", work)

    # -- plumbing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread; calling it twice is fine."""
        await self._worker.close()
