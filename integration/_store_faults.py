"""A SQLite store whose next write of a chosen kind fails, as a cut connection or a full disk does.

``FaultyStore`` is the embedded :class:`~agents_state_ext.SQLiteStore` with one switch:
:meth:`FaultyStore.fail` arms a fault for the next write of one kind, which then raises the
store's own ``StoreError`` before anything of it is written (SQLite rolls a failed transaction
back; a PostgreSQL connection cut before ``COMMIT`` writes nothing either). Kinds:

- ``start``: the commit that stores an attempt's start (it carries a ``queued`` record);
- ``end``: the commit that stores an attempt's end (it carries a ``complete`` record);
- ``registry``: the write of the conversation strategy's server conversations (chat metadata).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from agents_state_ext import AttemptRecord, Node, SQLiteStore
from agents_state_ext.errors import StoreError
from agents_state_ext.stores import Fence

FaultKind = Literal["start", "end", "registry"]


class FaultyStore(SQLiteStore):
    """A SQLite store that fails the next write of an armed kind with ``StoreError``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._armed: dict[FaultKind, tuple[int, int]] = {}  # kind -> (writes to let by, to fail)
        self.raised: list[FaultKind] = []
        """The faults raised so far, in order."""

    def fail(self, kind: FaultKind, *, skip: int = 0, times: int = 1) -> None:
        """Let the next ``skip`` writes of ``kind`` through, then fail ``times`` of them."""
        self._armed[kind] = (skip, times)

    def _trip(self, kind: FaultKind) -> None:
        skip, times = self._armed.get(kind, (0, 0))
        if skip > 0:
            self._armed[kind] = (skip - 1, times)
        elif times > 0:
            self._armed[kind] = (0, times - 1)
            self.raised.append(kind)
            raise StoreError(f"SQLite error on {self.path!r}: database or disk is full")

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
        nodes, attempts = list(nodes), list(attempts)
        statuses = {r.status for r in attempts}
        if "queued" in statuses:
            self._trip("start")
        if "complete" in statuses:
            self._trip("end")
        await super().commit(
            conversation_id,
            nodes,
            expected_head=expected_head,
            new_head=new_head,
            attempts=attempts,
            fence=fence,
        )

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        if "server_conversations" in meta:
            self._trip("registry")
        await super().update_conversation_meta(conversation_id, meta)
