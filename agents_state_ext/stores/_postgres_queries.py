"""The statements of :class:`~agents_state_ext.stores.PostgresStore`'s methods, on one connection.

Each function is what one store method does with its pooled connection (inside the method's
transaction when it has one), given its checked arguments. The store checks the arguments,
takes the connection, retries what is safe to retry (``_postgres_pool.guarded``) and decodes
what was read after giving the connection back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from psycopg import errors

from ..errors import ConcurrentUpdateError, StoreError
from . import _codec
from ._postgres_schema import (
    INSERT_CONVERSATION,
    INSERT_LEDGER,
    MOVE_HEAD,
    PATH_SQL,
    UPDATE_LEDGER,
    UPSERT_ATTEMPTS,
    UPSERT_TOKENS,
    WRITE_NODES,
    Conn,
    attempt_params,
    node_params,
    read_head,
)
from .base import AttemptNotFoundError

__all__ = [
    "commit",
    "create_conversation",
    "delete_conversation",
    "fetch_attempt",
    "fetch_graph",
    "fetch_node",
    "fetch_path",
    "put_ledger",
    "put_token_counts",
    "update_conversation_meta",
]


async def create_conversation(
    conn: Conn, cid: str, strategy: str, encoded: str, clock: Callable[[], float]
) -> None:
    cur = await conn.execute(INSERT_CONVERSATION, (cid, strategy, encoded, clock()))
    if cur.rowcount == 0:
        raise StoreError(f"conversation {cid!r} already exists")


async def update_conversation_meta(conn: Conn, cid: str, meta: Mapping[str, Any]) -> None:
    cur = await conn.execute("SELECT meta FROM conversations WHERE id = %s FOR UPDATE", (cid,))
    row = await cur.fetchone()
    if row is None:
        raise _codec.missing_conversation(cid)
    merged = _codec.encode({**_codec.decode(row[0]), **meta})
    await conn.execute("UPDATE conversations SET meta = %s WHERE id = %s", (merged, cid))


async def delete_conversation(conn: Conn, cid: str) -> None:
    # The foreign keys cascade to nodes, attempts, run states and token counts.
    cur = await conn.execute("DELETE FROM conversations WHERE id = %s", (cid,))
    if cur.rowcount == 0:
        raise _codec.missing_conversation(cid)
    await conn.execute("DELETE FROM ledgers WHERE key = %s", (cid,))


async def fetch_node(conn: Conn, cid: str, node_id: str) -> Any:
    """The stored node's row (its JSON first); a missing node or conversation raises."""
    cur = await conn.execute(
        "SELECT data FROM nodes WHERE conversation_id = %s AND id = %s", (cid, node_id)
    )
    row = await cur.fetchone()
    if row is None:
        await read_head(conn, cid)
        raise _codec.missing_node(cid, node_id)
    return row


async def fetch_graph(conn: Conn, cid: str) -> tuple[str | None, list[Any]]:
    """The head and every node row, in one snapshot (call it inside a transaction)."""
    # One snapshot for the head and the nodes, even across a concurrent delete.
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    head = await read_head(conn, cid)
    cur = await conn.execute(
        "SELECT data FROM nodes WHERE conversation_id = %s ORDER BY seq", (cid,)
    )
    return head, await cur.fetchall()


async def fetch_path(conn: Conn, params: Mapping[str, Any]) -> list[Any]:
    """The rows of the path ``params`` names; none when the conversation is empty."""
    cid, leaf_id = params["cid"], params["leaf"]
    cur = await conn.execute(PATH_SQL, params)
    rows = await cur.fetchall()
    if not rows:  # only an empty answer needs a second look: which of three reasons?
        head = await read_head(conn, cid)
        missing = leaf_id if leaf_id is not None else head
        if missing is not None:
            raise _codec.missing_node(cid, missing)
    return rows


async def commit(
    conn: Conn,
    cid: str,
    rows: list[_codec.NodeRow],
    records: dict[str, tuple[str, float | None, str]],
    heads: tuple[str | None, str | None],
    parents: dict[str, str],
    fenced: tuple[str, int] | None,
) -> None:
    """A commit's statements, in its transaction: fence, head, parents, nodes, attempts."""
    expected_head, new_head = heads
    written = {row[0] for row in rows}
    if fenced is not None:
        # FOR SHARE: a renewal or takeover of the lease waits for this transaction.
        key, token = fenced
        cur = await conn.execute("SELECT version FROM ledgers WHERE key = %s FOR SHARE", (key,))
        row = await cur.fetchone()
        if row is None or row[0] != token:
            raise _codec.fenced_out(key, None if row is None else row[0], token)
    cur = await conn.execute(MOVE_HEAD, (new_head, cid, expected_head))
    if cur.rowcount == 0:
        head = await read_head(conn, cid)
        raise ConcurrentUpdateError(
            f"conversation {cid!r}: head is {head!r}, expected {expected_head!r}"
        )
    if parents:
        cur = await conn.execute(
            "SELECT id FROM nodes WHERE conversation_id = %s AND id = ANY(%s)",
            (cid, list(parents)),
        )
        found = {row[0] for row in await cur.fetchall()}
        for parent, child in parents.items():
            if parent not in found:
                raise _codec.missing_parent(cid, child, parent)
    if rows:
        await conn.execute(WRITE_NODES, node_params(cid, rows))
    if new_head is not None and new_head not in written:
        cur = await conn.execute(
            "SELECT 1 FROM nodes WHERE conversation_id = %s AND id = %s", (cid, new_head)
        )
        if await cur.fetchone() is None:
            raise _codec.missing_node(cid, new_head)
    if records:
        await conn.execute(UPSERT_ATTEMPTS, attempt_params(cid, records))


async def fetch_attempt(conn: Conn, cid: str, attempt_id: str) -> Any:
    """The stored attempt record's row; a missing one (or conversation) raises."""
    cur = await conn.execute(
        "SELECT data FROM attempts WHERE conversation_id = %s AND attempt_id = %s",
        (cid, attempt_id),
    )
    row = await cur.fetchone()
    if row is None:
        await read_head(conn, cid)
        raise AttemptNotFoundError(f"no attempt {attempt_id!r} in conversation {cid!r}")
    return row


async def put_ledger(
    conn: Conn, key: str, blob: str, expected_version: int, hold: tuple[str | None, Any]
) -> None:
    """Insert (version 0) or move the ledger by compare-and-set; a conflict raises."""
    holder, until = hold
    if expected_version == 0:
        cur = await conn.execute(INSERT_LEDGER, (key, blob, holder, until))
    else:
        cur = await conn.execute(UPDATE_LEDGER, (blob, holder, until, key, expected_version))
    if cur.rowcount == 0:
        cur = await conn.execute("SELECT version FROM ledgers WHERE key = %s", (key,))
        row = await cur.fetchone()
        raise _codec.ledger_conflict(key, 0 if row is None else row[0], expected_version)


async def put_token_counts(conn: Conn, cid: str, encoding: str, checked: dict[str, int]) -> None:
    if not checked:
        await read_head(conn, cid)
        return
    try:
        await conn.execute(UPSERT_TOKENS, (cid, encoding, list(checked), list(checked.values())))
    except errors.ForeignKeyViolation as exc:
        raise _codec.missing_conversation(cid) from exc
