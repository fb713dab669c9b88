"""Opening a SQLite database file for the store, writable or read-only.

Writable: a file holding another application's tables is refused untouched; ours is switched
to WAL and migrated. Read-only (``mode=ro``): nothing is created, migrated or switched; a
database at an older schema version is shown through temporary tables and views that exist
only on that connection, so the current queries read it unchanged; a newer one is refused.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..errors import StoreError
from ._sqlite_schema import latest_version, migrate, newer_schema, schema_version

__all__ = ["connect"]

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


def connect(
    path: str, *, timeout: float, read_only: bool, migrations: Sequence[tuple[int, str]]
) -> sqlite3.Connection:
    """Open, check and (when writable) migrate the database at ``path``."""
    if read_only:
        if path in ("", ":memory:"):
            raise StoreError("a read-only SQLite store needs a database file")
        if not os.path.isfile(path):
            raise StoreError(f"SQLite database {path!r} does not exist")
        target, uri = Path(path).resolve().as_uri() + "?mode=ro", True
    else:
        target, uri = path, False
    try:
        conn = sqlite3.connect(target, timeout=timeout, isolation_level=None, uri=uri)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open SQLite database {path!r}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        if read_only:
            _prepare_read_only(conn, path, migrations)
        else:
            _refuse_foreign(conn, path)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn, migrations)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot open SQLite database {path!r}: {exc}") from exc
        raise
    return conn


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


def _prepare_read_only(
    conn: sqlite3.Connection, path: str, migrations: Sequence[tuple[int, str]]
) -> None:
    """Check a database opened read-only, and present an older schema as the current one."""
    names = _names(conn)
    if not {"schema_version", "conversations", "nodes", "attempts"} <= names:
        raise StoreError(f"{path!r} is not an agents-state-ext database")
    current, latest = schema_version(conn), latest_version(migrations)
    if current > latest:
        raise newer_schema(current, latest)
    if current == latest:
        return
    conn.execute("PRAGMA temp_store = MEMORY")
    for name, sql in _STAND_INS.items():
        if name not in names:
            conn.execute(sql)
    columns = {row[1] for row in conn.execute("PRAGMA main.table_info(nodes)")}
    if "parent_seq" not in columns:
        conn.execute(_NODES_STAND_IN)
