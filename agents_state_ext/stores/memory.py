"""InMemoryStore: the reference ConversationStore, for tests and single-process prototypes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import ConcurrentUpdateError, StoreError
from . import _codec
from .base import AttemptNotFoundError, ConversationInfo, Fence, LedgerRecord, StoreBase

__all__ = ["InMemoryStore"]


@dataclass
class _Conversation:
    info: ConversationInfo
    meta: str
    head: str | None = None
    nodes: dict[str, str] = field(default_factory=dict)  # id -> JSON, first-write order
    parents: dict[str, str | None] = field(default_factory=dict)  # id -> parent id
    attempts: dict[str, tuple[int, str]] = field(default_factory=dict)  # id -> (seq, JSON)
    run_states: dict[str, str] = field(default_factory=dict)  # attempt id -> blob
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)  # encoding -> id -> count


class InMemoryStore(StoreBase):
    """Keeps everything in process memory, as JSON, so it accepts and returns what SQLite does.

    Implements the core protocol and both capabilities (ledger, token counts). Each method
    runs without awaiting anything, so it is atomic within its event loop; lost on exit.
    ``clock`` stamps ``created_at``.
    """

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock or time.time
        self._conversations: dict[str, _Conversation] = {}
        self._ledgers: dict[str, LedgerRecord] = {}
        self._seq = 0
        self._closed = False

    def _open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _get(self, conversation_id: str) -> _Conversation:
        self._open()
        conv = self._conversations.get(_codec.check_id(conversation_id, "conversation id"))
        if conv is None:
            raise _codec.missing_conversation(conversation_id)
        return conv

    # -- conversations -----------------------------------------------------------------------

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        self._open()
        _codec.check_id(conversation_id, "conversation id")
        _codec.check_id(strategy, "strategy")
        encoded = _codec.encode(dict(meta or {}))
        if conversation_id in self._conversations:
            raise StoreError(f"conversation {conversation_id!r} already exists")
        info = ConversationInfo(conversation_id, strategy, {}, self._clock())
        self._conversations[conversation_id] = _Conversation(info, encoded)

    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        conv = self._get(conversation_id)
        info, meta = conv.info, _codec.decode(conv.meta)
        return ConversationInfo(info.id, info.strategy, meta, info.created_at)

    async def list_conversations(self) -> list[str]:
        self._open()
        return list(self._conversations)

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        conv = self._get(conversation_id)
        conv.meta = _codec.encode({**_codec.decode(conv.meta), **meta})

    async def delete_conversation(self, conversation_id: str) -> None:
        self._get(conversation_id)
        del self._conversations[conversation_id]
        self._ledgers.pop(conversation_id, None)

    # -- nodes and heads ---------------------------------------------------------------------

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        conv = self._get(conversation_id)
        data = conv.nodes.get(_codec.check_id(node_id, "node id"))
        if data is None:
            raise _codec.missing_node(conversation_id, node_id)
        return _codec.decode_node(data)

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        conv = self._get(conversation_id)
        nodes = [_codec.decode_node(data) for data in conv.nodes.values()]
        return _codec.graph_of(conversation_id, nodes, conv.head)

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        conv = self._get(conversation_id)
        limit = _codec.check_limit(limit)
        node_id = conv.head if leaf_id is None else _codec.check_id(leaf_id, "node id")
        if node_id is not None and node_id not in conv.nodes:
            raise _codec.missing_node(conversation_id, node_id)
        ids: list[str] = []
        seen: set[str] = set()
        while node_id is not None and (limit is None or len(ids) < limit):
            if node_id in seen or node_id not in conv.nodes:
                raise _codec.broken_chain(conversation_id, node_id)
            seen.add(node_id)
            ids.append(node_id)
            node_id = conv.parents[node_id]
        ids.reverse()
        return [_codec.decode_node(conv.nodes[i]) for i in ids]

    async def get_head(self, conversation_id: str) -> str | None:
        return self._get(conversation_id).head

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
        conv = self._get(conversation_id)
        rows = _codec.encode_nodes(nodes)
        records = [(row[0], row[3]) for row in map(_codec.attempt_row, attempts)]
        for head_id in (expected_head, new_head):
            if head_id is not None:
                _codec.check_id(head_id, "node id")
        fenced = _codec.check_fence(fence)
        if fenced is not None:
            lease = self._ledgers.get(fenced[0])
            stored = None if lease is None else lease.version
            if stored != fenced[1]:
                raise _codec.fenced_out(fenced[0], stored, fenced[1])
        if conv.head != expected_head:
            raise ConcurrentUpdateError(
                f"conversation {conversation_id!r}: head is {conv.head!r},"
                f" expected {expected_head!r}"
            )
        written = {node_id for node_id, _, _ in rows}
        if new_head is not None and new_head not in conv.nodes and new_head not in written:
            raise _codec.missing_node(conversation_id, new_head)
        for parent, child in _codec.unknown_parents(rows).items():
            if parent not in conv.nodes:
                raise _codec.missing_parent(conversation_id, child, parent)
        for node_id, parent_id, data in rows:
            conv.nodes[node_id] = data
            conv.parents[node_id] = parent_id
        for attempt_id, data in records:
            self._put_attempt(conv, attempt_id, data)
        conv.head = new_head

    # -- attempts ----------------------------------------------------------------------------

    def _put_attempt(self, conv: _Conversation, attempt_id: str, data: str) -> None:
        previous = conv.attempts.get(attempt_id)
        if previous is None:
            self._seq += 1
        conv.attempts[attempt_id] = (previous[0] if previous else self._seq, data)

    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        conv = self._get(conversation_id)
        attempt_id, _, _, data = _codec.attempt_row(record)
        self._put_attempt(conv, attempt_id, data)

    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        conv = self._get(conversation_id)
        found = conv.attempts.get(_codec.check_id(attempt_id, "attempt id"))
        if found is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in conversation {conversation_id!r}"
            )
        return _codec.decode_attempt(found[1])

    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        conv = self._get(conversation_id)
        if message_id is not None:
            _codec.check_id(message_id, "message id")
        records = [(seq, _codec.decode_attempt(data)) for seq, data in conv.attempts.values()]
        records.sort(key=lambda pair: _codec.start_order(pair[1].started_at, pair[0]))
        return [r for _, r in records if message_id is None or r.message_id == message_id]

    # -- paused runs -------------------------------------------------------------------------

    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        conv = self._get(conversation_id)
        _codec.check_blob(blob)
        conv.run_states[_codec.check_id(attempt_id, "attempt id")] = blob

    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        conv = self._get(conversation_id)
        return conv.run_states.get(_codec.check_id(attempt_id, "attempt id"))

    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        conv = self._get(conversation_id)
        conv.run_states.pop(_codec.check_id(attempt_id, "attempt id"), None)

    # -- ledger (capability) -----------------------------------------------------------------

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        self._open()
        return self._ledgers.get(_codec.check_id(key, "ledger key"))

    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        self._open()
        _codec.check_id(key, "ledger key")
        _codec.check_blob(blob)
        stored = self._ledgers.get(key)
        version = stored.version if stored is not None else 0
        if version != expected_version:
            raise _codec.ledger_conflict(key, version, expected_version)
        self._ledgers[key] = LedgerRecord(blob, version + 1, holder, held_until)
        return version + 1

    async def delete_ledger(self, key: str) -> None:
        self._open()
        self._ledgers.pop(_codec.check_id(key, "ledger key"), None)

    # -- token counts (capability) -----------------------------------------------------------

    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        conv = self._get(conversation_id)
        checked = _codec.check_counts(encoding, counts)
        conv.tokens.setdefault(encoding, {}).update(checked)

    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        conv = self._get(conversation_id)
        stored = conv.tokens.get(_codec.check_id(encoding, "encoding"), {})
        if node_ids is None:
            return dict(stored)
        wanted = [_codec.check_id(i, "node id") for i in node_ids]
        return {i: stored[i] for i in wanted if i in stored}

    async def aclose(self) -> None:
        self._closed = True
