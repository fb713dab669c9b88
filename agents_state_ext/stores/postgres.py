"""PostgresStore: a ConversationStore in PostgreSQL, shared by workers on many machines.

Install with ``pip install 'agents-state-ext[postgres]'``. It runs on psycopg 3's async API
and a ``psycopg_pool`` pool: one driver with a sync API too, LISTEN/NOTIFY, and the driver the
SDK's ``SQLAlchemySession`` uses through ``postgresql+psycopg`` URLs (accepted here as well).

Branch heads move by compare-and-set: ``commit`` runs ``UPDATE ... WHERE head IS NOT DISTINCT
FROM expected`` first, in the same transaction as its node and attempt writes. The update locks
the conversation's row, so concurrent commits from any process or machine are serialized, and a
row count of zero is ``ConcurrentUpdateError`` with nothing written. Ledgers move the same way
on their version.

JSON (nodes, attempt records, metadata) is kept as ``text``, not ``jsonb``: ``jsonb`` reorders
keys, drops duplicate keys, refuses ``\\u0000`` and rewrites numbers (``1e2`` becomes ``100``),
and a store returns exactly what it was given, as SQLite does. No query looks inside the JSON:
role, status and the integer parent pointer have columns of their own.

Tables go in ``schema`` (created when missing), else in the connection's ``search_path``. In a
database shared with an application, give the store a schema of its own: the table names
(``conversations``, ``nodes``, ...) are plain.

The schema versions in ``MIGRATIONS`` (their changelog is beside them, in ``_postgres_schema``)
are applied in order on ``connect``, once however many workers connect at the same time; a
database written by a newer version fails fast with ``StoreError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

try:
    from psycopg import errors
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "PostgresStore needs psycopg 3 and psycopg-pool: pip install 'agents-state-ext[postgres]'"
    ) from exc

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from . import _codec
from . import _postgres_queries as q
from ._postgres_outcome import atomic
from ._postgres_pool import CallGuard, guarded, open_pool, pooled
from ._postgres_schema import (
    LIST_ATTEMPTS,
    MIGRATIONS,
    SELECT_TOKENS,
    UPSERT_ATTEMPTS,
    UPSERT_RUN_STATE,
    Conn,
    attempt_params,
    attempt_rows,
    path_nodes,
    read_head,
)
from .base import ConversationInfo, Fence, LedgerRecord, StoreBase

__all__ = ["MIGRATIONS", "PostgresStore"]


class PostgresStore(StoreBase):
    """A ConversationStore, LedgerStore and TokenCountStore in PostgreSQL; open it with ``connect``.

    Every method takes a pooled connection for one statement or one transaction; PostgreSQL
    errors become ``StoreError``, and those that say the server cannot be reached or did not
    answer (a refused or cut connection, a restart, a pool or statement timeout)
    ``StoreUnavailableError``. After a lost connection the pool's idle connections are checked
    and the call is tried once more where that is safe (a read; an upsert or delete by key; a
    transaction the server did not apply), so a worker heals by itself once the server is
    back. A transaction whose ``COMMIT`` was sent when the connection broke is looked up on
    the server (``txid_status``): applied, it returns as stored.
    ``statement_timeout`` (seconds) bounds each call on this side too: a call with no answer a
    second after it is ``StoreUnavailableError`` (a blackholed server answers nothing, not even
    an error); ``None``: no bound. ``clock`` stamps ``created_at``.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Conn],
        *,
        clock: Callable[[], float] | None = None,
        statement_timeout: float | None = None,
    ) -> None:
        self._pool: AsyncConnectionPool[Conn] | None = pool
        self._clock = clock or time.time
        self._guard = CallGuard(None if statement_timeout is None else statement_timeout + 1.0)
        self._guard.pool = pool

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        statement_timeout: float | None = 15.0,
        clock: Callable[[], float] | None = None,
    ) -> PostgresStore:
        """Open a pool on ``url``, bring the schema up to date, and return the store.

        ``url`` is a libpq URL or ``key=value`` string (``postgresql+psycopg://`` is accepted).
        ``schema`` holds the tables (created when missing; default: the connection's
        ``search_path``). ``timeout`` bounds, in seconds, connecting and waiting for a pooled
        connection. ``statement_timeout`` (seconds) is set on every connection, and bounds each
        call on this side as well (see the class); ``None`` leaves the server's setting and
        bounds nothing. Past either, a call is ``StoreUnavailableError``.
        """
        # MIGRATIONS is read here, at connect, so that it can be replaced on this module.
        pool = await open_pool(
            url,
            schema=schema,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            statement_timeout=statement_timeout,
            migrations=MIGRATIONS,
        )
        return cls(pool, clock=clock, statement_timeout=statement_timeout)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        return pooled(self._pool)

    # -- conversations -----------------------------------------------------------------------

    @guarded("atomic")
    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(strategy, "strategy")
        encoded = _codec.encode(dict(meta or {}))
        async with self._connection() as conn, atomic(conn):
            await q.create_conversation(conn, conversation_id, strategy, encoded, self._clock)

    @guarded("read")
    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        _codec.check_id(conversation_id, "conversation id")
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT strategy, meta, created_at FROM conversations WHERE id = %s",
                (conversation_id,),
            )
            row = await cur.fetchone()
        if row is None:
            raise _codec.missing_conversation(conversation_id)
        return ConversationInfo(conversation_id, row[0], _codec.decode(row[1]), float(row[2]))

    @guarded("read")
    async def list_conversations(self) -> list[str]:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT id FROM conversations ORDER BY seq")
            return [row[0] for row in await cur.fetchall()]

    @guarded("atomic")
    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        _codec.check_id(conversation_id, "conversation id")
        async with self._connection() as conn, atomic(conn):
            await q.update_conversation_meta(conn, conversation_id, meta)

    @guarded("atomic")
    async def delete_conversation(self, conversation_id: str) -> None:
        _codec.check_id(conversation_id, "conversation id")
        async with self._connection() as conn, atomic(conn):
            await q.delete_conversation(conn, conversation_id)

    # -- nodes and heads ---------------------------------------------------------------------

    @guarded("read")
    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(node_id, "node id")
        async with self._connection() as conn:
            row = await q.fetch_node(conn, conversation_id, node_id)
        return _codec.decode_nodes([row[0]])[0]

    @guarded("read")
    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        _codec.check_id(conversation_id, "conversation id")
        async with self._connection() as conn, conn.transaction():
            head, rows = await q.fetch_graph(conn, conversation_id)
        return _codec.graph_of(conversation_id, _codec.decode_nodes(row[0] for row in rows), head)

    @guarded("read")
    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        _codec.check_id(conversation_id, "conversation id")
        if leaf_id is not None:
            _codec.check_id(leaf_id, "node id")
        limit = _codec.check_limit(limit)
        params = {"cid": conversation_id, "leaf": leaf_id, "limit": limit}
        async with self._connection() as conn:
            rows = await q.fetch_path(conn, params)
        return path_nodes(conversation_id, rows, limit) if rows else []

    @guarded("read")
    async def get_head(self, conversation_id: str) -> str | None:
        _codec.check_id(conversation_id, "conversation id")
        async with self._connection() as conn:
            return await read_head(conn, conversation_id)

    @guarded("atomic")
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
        _codec.check_id(conversation_id, "conversation id")
        rows = _codec.encode_node_rows(nodes)
        parents = _codec.unknown_parents(rows)
        records = attempt_rows(attempts)
        for head in (expected_head, new_head):
            if head is not None:
                _codec.check_id(head, "node id")
        fenced = _codec.check_fence(fence)
        heads = (expected_head, new_head)
        async with self._connection() as conn, atomic(conn):
            await q.commit(conn, conversation_id, rows, records, heads, parents, fenced)

    # -- attempts ----------------------------------------------------------------------------

    @guarded("idempotent")
    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        _codec.check_id(conversation_id, "conversation id")
        params = attempt_params(conversation_id, attempt_rows([record]))
        async with self._connection() as conn:
            try:
                await conn.execute(UPSERT_ATTEMPTS, params)
            except errors.ForeignKeyViolation as exc:
                raise _codec.missing_conversation(conversation_id) from exc

    @guarded("read")
    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(attempt_id, "attempt id")
        async with self._connection() as conn:
            row = await q.fetch_attempt(conn, conversation_id, attempt_id)
        return _codec.decode_attempt(row[0])

    @guarded("read")
    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        _codec.check_id(conversation_id, "conversation id")
        if message_id is not None:
            _codec.check_id(message_id, "message id")
        # The order of _codec.start_order: unset start times last, ties by first write.
        async with self._connection() as conn:
            cur = await conn.execute(LIST_ATTEMPTS, (conversation_id, message_id, message_id))
            rows = await cur.fetchall()
            if not rows:
                await read_head(conn, conversation_id)
        return [_codec.decode_attempt(row[0]) for row in rows]

    # -- paused runs -------------------------------------------------------------------------

    @guarded("idempotent")
    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(attempt_id, "attempt id")
        _codec.check_blob(blob)
        async with self._connection() as conn:
            try:
                await conn.execute(
                    UPSERT_RUN_STATE, (conversation_id, attempt_id, blob, self._clock())
                )
            except errors.ForeignKeyViolation as exc:
                raise _codec.missing_conversation(conversation_id) from exc

    @guarded("read")
    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(attempt_id, "attempt id")
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT data FROM run_states WHERE conversation_id = %s AND attempt_id = %s",
                (conversation_id, attempt_id),
            )
            row = await cur.fetchone()
            if row is None:
                await read_head(conn, conversation_id)
                return None
        blob: str = row[0]
        return blob

    @guarded("idempotent")
    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(attempt_id, "attempt id")
        async with self._connection() as conn:
            cur = await conn.execute(
                "DELETE FROM run_states WHERE conversation_id = %s AND attempt_id = %s",
                (conversation_id, attempt_id),
            )
            if cur.rowcount == 0:
                await read_head(conn, conversation_id)

    # -- ledger (capability) -----------------------------------------------------------------

    @guarded("read")
    async def get_ledger(self, key: str) -> LedgerRecord | None:
        _codec.check_id(key, "ledger key")
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT blob, version, holder, held_until FROM ledgers WHERE key = %s", (key,)
            )
            row = await cur.fetchone()
        if row is None:
            return None
        held_until = None if row[3] is None else float(row[3])
        return LedgerRecord(row[0], int(row[1]), row[2], held_until)

    @guarded("write")
    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        _codec.check_id(key, "ledger key")
        _codec.check_blob(blob)
        expected_version = _codec.check_version(expected_version)
        holder, until = _codec.check_hold(holder, held_until)
        async with self._connection() as conn, atomic(conn):
            await q.put_ledger(conn, key, blob, expected_version, (holder, until))
        return expected_version + 1

    @guarded("idempotent")
    async def delete_ledger(self, key: str) -> None:
        _codec.check_id(key, "ledger key")
        async with self._connection() as conn:
            await conn.execute("DELETE FROM ledgers WHERE key = %s", (key,))

    # -- token counts (capability) -----------------------------------------------------------

    @guarded("idempotent")
    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        _codec.check_id(conversation_id, "conversation id")
        checked = _codec.check_counts(encoding, counts)
        async with self._connection() as conn:
            await q.put_token_counts(conn, conversation_id, encoding, checked)

    @guarded("read")
    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(encoding, "encoding")
        wanted = None if node_ids is None else [_codec.check_id(i, "node id") for i in node_ids]
        async with self._connection() as conn:
            cur = await conn.execute(SELECT_TOKENS, (conversation_id, encoding, wanted, wanted))
            rows = await cur.fetchall()
            if not rows:
                await read_head(conn, conversation_id)
        return {node_id: int(tokens) for node_id, tokens in rows}
