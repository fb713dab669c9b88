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
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import StoreError
from . import _codec
from . import _sqlite_queries as q
from ._sqlite_schema import MIGRATIONS, read_head
from ._sqlite_worker import SQLiteWorker
from .base import ConversationInfo, Fence, LedgerRecord, StoreBase

__all__ = ["MIGRATIONS", "SQLiteStore"]


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

    # -- conversations: each method checks its arguments, then its query runs on the worker --

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, _codec.check_id(strategy, "strategy"), _codec.encode(dict(meta or {})))
        await self._worker.run("write", lambda c: q.create_conversation(c, row, self._clock))

    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        cid = _codec.check_id(conversation_id, "conversation id")
        return await self._worker.run("read", lambda c: q.get_conversation(c, cid))

    async def list_conversations(self) -> list[str]:
        return await self._worker.run("read", q.list_conversations)

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        update = dict(meta)
        _codec.encode(update)
        await self._worker.run("write", lambda c: q.update_conversation_meta(c, cid, update))

    async def delete_conversation(self, conversation_id: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        await self._worker.run("write", lambda c: q.delete_conversation(c, cid))

    # -- nodes and heads ---------------------------------------------------------------------

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        cid = _codec.check_id(conversation_id, "conversation id")
        nid = _codec.check_id(node_id, "node id")
        return await self._worker.run("read", lambda c: q.get_node(c, cid, nid))

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        cid = _codec.check_id(conversation_id, "conversation id")
        # One snapshot for the head and the nodes.
        return await self._worker.run("snapshot", lambda c: q.load_graph(c, cid))

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        cid = _codec.check_id(conversation_id, "conversation id")
        leaf = None if leaf_id is None else _codec.check_id(leaf_id, "node id")
        params = {"cid": cid, "leaf": leaf, "limit": _codec.check_limit(limit)}
        return await self._worker.run("read", lambda c: q.active_path(c, params))

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
        parents = _codec.unknown_parents(rows)
        fenced = _codec.check_fence(fence)
        heads = (expected_head, new_head)
        await self._worker.run(
            "write", lambda c: q.commit(c, cid, rows, records, heads, parents, fenced)
        )

    # -- attempts ----------------------------------------------------------------------------

    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, *_codec.attempt_row(record))
        await self._worker.run("write", lambda c: q.put_attempt(c, row))

    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")
        return await self._worker.run("read", lambda c: q.get_attempt(c, cid, aid))

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
        return await self._worker.run("read", lambda c: q.list_attempts(c, cid, sql, args))

    # -- paused runs -------------------------------------------------------------------------

    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        row = (cid, _codec.check_id(attempt_id, "attempt id"), _codec.check_blob(blob))
        await self._worker.run("write", lambda c: q.put_run_state(c, row, self._clock))

    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")
        return await self._worker.run("read", lambda c: q.get_run_state(c, cid, aid))

    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        aid = _codec.check_id(attempt_id, "attempt id")
        await self._worker.run("write", lambda c: q.delete_run_state(c, cid, aid))

    # -- ledger (capability) -----------------------------------------------------------------

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        checked = _codec.check_id(key, "ledger key")
        return await self._worker.run("read", lambda c: q.get_ledger(c, checked))

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
        return await self._worker.run(
            "write", lambda c: q.put_ledger(c, checked, text, expected, hold)
        )

    async def delete_ledger(self, key: str) -> None:
        checked = _codec.check_id(key, "ledger key")
        await self._worker.run("write", lambda c: q.delete_ledger(c, checked))

    # -- token counts (capability) -----------------------------------------------------------

    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        cid = _codec.check_id(conversation_id, "conversation id")
        checked = _codec.check_counts(encoding, counts)
        rows = [(cid, encoding, node_id, tokens) for node_id, tokens in checked.items()]
        await self._worker.run("write", lambda c: q.put_token_counts(c, cid, rows))

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
        return await self._worker.run("read", lambda c: q.get_token_counts(c, cid, sql, args))

    # -- plumbing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread; calling it twice is fine."""
        await self._worker.close()
