"""The keys of a RedisStore, how its scripts' answers are read, and a commit's arguments.

Key layout (``ns`` is the namespace; ``C`` is ``{<length of id>:<id>}``, the conversation id
prefixed by its length so that no two conversations' keys can collide, whatever their ids hold):

- ``ns:conversations``: sorted set, conversation id -> creation number (``list_conversations``).
- ``ns:conversation-seq``: the counter behind those creation numbers.
- ``ns:conv:C:info``: hash: ``strategy``, ``meta`` (JSON), ``created_at``, ``head`` (absent:
  no head). Its presence is what makes the conversation exist.
- ``ns:conv:C:nodes``: hash, node id -> node JSON; ``ns:conv:C:parents``: hash, node id ->
  parent id (empty: a root), so ``active_path`` walks parents without decoding nodes;
  ``ns:conv:C:node-order``: list of node ids in first-write order.
- ``ns:conv:C:attempts``: hash, attempt id -> record JSON; ``ns:conv:C:attempt-order``: list of
  attempt ids in first-write order (the tie-break of start order).
- ``ns:conv:C:runs``: hash, attempt id -> serialized paused run.
- ``ns:conv:C:tokens:<encoding>``: hash, node id -> token count; ``ns:conv:C:encodings``: set of
  the encodings with counts, so a delete finds them.
- ``ns:conv:C:ledger``: hash: ``blob``, ``version``, ``holder``, ``held_until`` (a ledger key is
  a conversation id, so it lives beside the conversation; it may exist without one).
- ``ns:conv:C:outcomes`` and ``ns:conv:C:outcome-times``: each write's answer under its commit
  id, and when it was noted (``_redis_outcome``: what became of a write whose connection broke);
  ``ns:outcomes`` and ``ns:outcome-times`` are the same for ``create_conversation`` and
  ``delete_conversation``.
- ``ns:epoch``: a random mark left on the store's first use of the namespace, never changed.

The braces in ``C`` are a Redis Cluster hash tag: every key of one conversation, its ledger
included, hashes to one slot, which is what a cluster needs for the per-conversation scripts.
Only ``create_conversation`` and ``delete_conversation`` also touch the two ``ns:conversation*``
keys; on a cluster they would have to update that index apart. This store targets one primary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import StoreError
from . import _codec

__all__ = ["Keys", "commit_call", "outcome"]


class Keys:
    """The keys of one conversation (the layout is in this module's docstring)."""

    def __init__(self, namespace: str, conversation_id: str) -> None:
        self.id = conversation_id
        prefix = f"{namespace}:conv:{{{len(conversation_id)}:{conversation_id}}}:"
        self.info = prefix + "info"
        self.nodes = prefix + "nodes"
        self.parents = prefix + "parents"
        self.node_order = prefix + "node-order"
        self.attempts = prefix + "attempts"
        self.attempt_order = prefix + "attempt-order"
        self.runs = prefix + "runs"
        self.encodings = prefix + "encodings"
        self.tokens_prefix = prefix + "tokens:"
        self.ledger = prefix + "ledger"
        self.noted = [prefix + "outcomes", prefix + "outcome-times"]

    def tokens(self, encoding: str) -> str:
        """The key of the conversation's token counts in ``encoding``."""
        return self.tokens_prefix + encoding

    def fixed(self) -> list[str]:
        """Every key whose name does not depend on data (token-count keys do)."""
        return [
            self.info,
            self.nodes,
            self.parents,
            self.node_order,
            self.attempts,
            self.attempt_order,
            self.runs,
            self.encodings,
            self.ledger,
            *self.noted,
        ]


def outcome(result: list[Any], keys: Keys) -> list[Any]:
    """A script's answer after its status, or the error that status stands for."""
    status, rest = result[0], result[1:]
    if status == "ok":
        return rest
    if status == "no-conversation":
        raise _codec.missing_conversation(keys.id)
    if status == "no-node":
        raise _codec.missing_node(keys.id, rest[0])
    if status == "no-parent":
        raise _codec.missing_parent(keys.id, rest[0], rest[1])
    if status == "broken":
        raise _codec.broken_chain(keys.id, rest[0])
    raise StoreError(f"conversation {keys.id!r}: unexpected answer from Redis: {status!r}")


def commit_call(
    keys: Keys,
    ledger: str | None,
    rows: Sequence[tuple[str, str | None, str]],
    records: Sequence[tuple[str, str]],
    *,
    expected: str,
    head: str,
    version: int,
) -> tuple[list[str], list[str | int]]:
    """The ``KEYS`` and ``ARGV`` of the ``COMMIT`` script.

    ``rows`` are (node id, parent id, node JSON), ``records`` (attempt id, record JSON);
    ``expected`` and ``head`` are node ids, empty for none; ``ledger`` the fencing ledger's key
    (``None``: not fenced) with the fence ``version``.
    """
    written = "1" if any(node_id == head for node_id, _, _ in rows) else "0"
    args: list[str | int] = [expected, head, written, len(rows), version]
    for node_id, parent_id, data in rows:
        args += [node_id, parent_id or "", data]
    for attempt_id, data in records:
        args += [attempt_id, data]
    where = [
        keys.info,
        keys.nodes,
        keys.parents,
        keys.node_order,
        keys.attempts,
        keys.attempt_order,
        keys.info if ledger is None else ledger,
    ]
    return where, args
