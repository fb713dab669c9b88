"""InMemoryStore: the reference ConversationStore, for tests and single-process prototypes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..attempts import AttemptRecord
from ..errors import ConcurrentUpdateError, StoreError
from ..graph import ConversationGraph
from ..nodes import Node
from . import _codec
from .base import AttemptNotFoundError, ConversationInfo, ConversationStore

__all__ = ["InMemoryStore"]


@dataclass
class _Conversation:
    info: ConversationInfo
    meta: str
    head: str | None = None
    nodes: dict[str, str] = field(default_factory=dict)  # id -> JSON, first-write order
    attempts: dict[str, tuple[int, str]] = field(default_factory=dict)  # id -> (seq, JSON)
    run_states: dict[str, str] = field(default_factory=dict)  # attempt id -> blob


class InMemoryStore(ConversationStore):
    """Keeps everything in process memory, as JSON, so it accepts and returns what SQLite does.

    Thread-safe; lost on exit. ``clock`` stamps ``created_at``.
    """

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock or time.time
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}
        self._seq = 0
        self._closed = False

    def _get(self, conversation_id: str) -> _Conversation:
        if self._closed:
            raise StoreError("the store is closed")
        conv = self._conversations.get(conversation_id)
        if conv is None:
            raise _codec.missing_conversation(conversation_id)
        return conv

    def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        encoded = _codec.encode(dict(meta or {}))
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            if conversation_id in self._conversations:
                raise StoreError(f"conversation {conversation_id!r} already exists")
            info = ConversationInfo(conversation_id, strategy, {}, self._clock())
            self._conversations[conversation_id] = _Conversation(info, encoded)

    def get_conversation(self, conversation_id: str) -> ConversationInfo:
        with self._lock:
            conv = self._get(conversation_id)
            info, meta = conv.info, _codec.decode(conv.meta)
        return ConversationInfo(info.id, info.strategy, meta, info.created_at)

    def list_conversations(self) -> list[str]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            return list(self._conversations)

    def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        with self._lock:
            conv = self._get(conversation_id)
            conv.meta = _codec.encode({**_codec.decode(conv.meta), **meta})

    def put_nodes(self, conversation_id: str, nodes: Iterable[Node]) -> None:
        rows = _codec.encode_nodes(nodes)
        with self._lock:
            conv = self._get(conversation_id)
            conv.nodes.update((node_id, data) for node_id, _, data in rows)

    def get_node(self, conversation_id: str, node_id: str) -> Node:
        with self._lock:
            data = self._get(conversation_id).nodes.get(node_id)
        if data is None:
            raise _codec.missing_node(conversation_id, node_id)
        return _codec.decode_node(data)

    def load_graph(self, conversation_id: str) -> ConversationGraph:
        with self._lock:
            conv = self._get(conversation_id)
            head, rows = conv.head, list(conv.nodes.values())
        nodes = [_codec.decode_node(data) for data in rows]
        return ConversationGraph.from_nodes(
            nodes, conversation_id=conversation_id, active_leaf=head
        )

    def active_path(self, conversation_id: str, leaf_id: str | None = None) -> list[Node]:
        with self._lock:
            conv = self._get(conversation_id)
            node_id = leaf_id if leaf_id is not None else conv.head
            if node_id is not None and node_id not in conv.nodes:
                raise _codec.missing_node(conversation_id, node_id)
            path: list[Node] = []
            while node_id is not None:
                data = conv.nodes.get(node_id)
                if data is None or len(path) > len(conv.nodes):
                    raise StoreError(f"conversation {conversation_id!r}: broken parent chain")
                path.append(_codec.decode_node(data))
                node_id = path[-1].parent_id
        path.reverse()
        return path

    def get_head(self, conversation_id: str) -> str | None:
        with self._lock:
            return self._get(conversation_id).head

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
        with self._lock:
            conv = self._get(conversation_id)
            if conv.head != expected_head:
                raise ConcurrentUpdateError(
                    f"conversation {conversation_id!r}: head is {conv.head!r},"
                    f" expected {expected_head!r}"
                )
            written = {node_id for node_id, _, _ in rows}
            if new_head is not None and new_head not in conv.nodes and new_head not in written:
                raise _codec.missing_node(conversation_id, new_head)
            conv.nodes.update((node_id, data) for node_id, _, data in rows)
            conv.head = new_head

    def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        data = _codec.encode_attempt(record)
        with self._lock:
            conv = self._get(conversation_id)
            previous = conv.attempts.get(record.attempt_id)
            if previous is None:
                self._seq += 1
            conv.attempts[record.attempt_id] = (previous[0] if previous else self._seq, data)

    def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        with self._lock:
            found = self._get(conversation_id).attempts.get(attempt_id)
        if found is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in conversation {conversation_id!r}"
            )
        return _codec.decode_attempt(found[1])

    def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        with self._lock:
            rows = list(self._get(conversation_id).attempts.values())
        records = [(seq, _codec.decode_attempt(data)) for seq, data in rows]
        records.sort(key=lambda pair: _codec.start_order(pair[1].started_at, pair[0]))
        return [r for _, r in records if message_id is None or r.message_id == message_id]

    def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        _codec.check_blob(blob)
        with self._lock:
            self._get(conversation_id).run_states[attempt_id] = blob

    def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        with self._lock:
            return self._get(conversation_id).run_states.get(attempt_id)

    def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        with self._lock:
            self._get(conversation_id).run_states.pop(attempt_id, None)

    def close(self) -> None:
        self._closed = True
