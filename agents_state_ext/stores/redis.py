"""RedisStore: a ConversationStore on Redis 7, through redis-py's asyncio client.

Install with ``pip install agents-state-ext[redis]``. It implements the core protocol and both
capabilities (ledger, token counts), and stores the same data as the other backends.

Every check-and-write is one Lua script (``EVALSHA``; redis-py reloads a script the server
lost, after a restart or ``SCRIPT FLUSH``), so it is atomic against every other client:
``commit`` (nodes, attempt records and the head move, only from the expected head),
``put_ledger`` (only from the expected version), ``create_conversation`` (only if the id is
free) and ``delete_conversation`` (every key of the conversation and its ledger). A lost
compare-and-set is ``ConcurrentUpdateError`` and writes nothing. Scripts run with Redis 7
flags (``#!lua``), so a server out of memory refuses a writing script before it starts, not in
the middle. Reads of several keys go through one ``MULTI`` block, a consistent snapshot.
A script runs alone on the server: committing thousands of nodes at once, or walking a very
long path, makes every other client of that Redis wait for it.

The key layout is in :mod:`agents_state_ext.stores._redis_keys`: every key of one conversation
hashes to one Redis Cluster slot; this store targets one primary.

Durability: Redis keeps data only as its persistence is configured. With neither RDB snapshots
nor the append-only file, a restart loses every conversation (the CI's Redis keeps nothing on
disk). The store notices when it can (:mod:`._redis_known`): a conversation it saw exist that
is missing while ``ns:epoch`` is gone or changed is ``StoreDataLostError``, never an unknown
(and so creatable) id; the worker goes on serving new conversations.
``appendonly yes`` with ``appendfsync always`` loses no acknowledged write on a crash,
at the cost of an fsync per write; ``appendfsync everysec`` may lose the last second. Replication
is asynchronous: a failover to a replica can lose writes the primary acknowledged, a won
compare-and-set among them, so two workers may both believe they moved a head. Use PostgreSQL
as the system of record; Redis suits shared, short-lived conversations and caches.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis.asyncio as aioredis

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import (
    ConcurrentUpdateError,
    StoreError,
)
from . import _codec
from ._redis_capabilities import RedisLedgers, RedisTokenCounts
from ._redis_keys import Keys, commit_call, outcome
from ._redis_known import KnownConversations
from ._redis_link import RedisLink, open_client, redact
from ._redis_outcome import recorded
from ._redis_scripts import (
    ACTIVE_PATH,
    COMMIT,
    CREATE,
    DELETE,
    HASH_DELETE,
    HASH_SET,
    PUT_ATTEMPT,
    PUT_LEDGER,
    SET_META,
)
from .base import AttemptNotFoundError, ConversationInfo, Fence, LedgerRecord, StoreBase

__all__ = ["DEFAULT_NAMESPACE", "RedisStore"]

DEFAULT_NAMESPACE = "agents-state-ext"

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _watched(
    method: Callable[Concatenate[RedisStore, str, _P], Coroutine[Any, Any, _T]],
) -> Callable[Concatenate[RedisStore, str, _P], Coroutine[Any, Any, _T]]:
    """A method on one conversation: its id is remembered, and its loss told from absence."""

    @functools.wraps(method)
    async def call(
        self: RedisStore, conversation_id: str, /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        return await self._known.watch(
            conversation_id, method(self, conversation_id, *args, **kwargs)
        )

    return call


class RedisStore(StoreBase):
    """A ConversationStore in Redis, shared safely by processes and machines.

    Open one with :meth:`connect`, or wrap a ``redis.asyncio.Redis`` of your own (created with
    ``decode_responses=True``; closing it is then left to you). ``namespace`` prefixes every
    key, so several stores can share a database. ``clock`` stamps ``created_at``. Read the
    module docstring on durability before keeping anything valuable in it.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._ns = _codec.check_id(namespace, "namespace")
        self._link = RedisLink(client, epoch_key=f"{self._ns}:epoch")
        self._known = KnownConversations(self._link)
        self._clock = clock or time.time
        self._index = f"{self._ns}:conversations"
        self._noted = [f"{self._ns}:outcomes", f"{self._ns}:outcome-times"]

        def script(text: str) -> Any:
            return client.register_script(recorded(text))

        self._create, self._commit = script(CREATE), script(COMMIT)
        self._active_path = client.register_script(ACTIVE_PATH)
        self._put_attempt, self._set_meta = script(PUT_ATTEMPT), script(SET_META)
        self._hash_set, self._hash_delete = script(HASH_SET), script(HASH_DELETE)
        self._delete = script(DELETE)
        self._ledgers = RedisLedgers(self._link, self._ns, script(PUT_LEDGER))
        self._tokens = RedisTokenCounts(self._link, self._hash_set)

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        clock: Callable[[], float] | None = None,
        **client_options: Any,
    ) -> RedisStore:
        """Connect to ``url`` (``redis://host:6379/0``, ``rediss://``, ``unix://``) and ping it.

        ``client_options`` go to ``redis.asyncio.Redis.from_url`` (``decode_responses`` is
        always on). An address that does not answer is ``StoreError``; :meth:`aclose` closes
        the client.
        """
        where = redact(url)
        _codec.check_id(namespace, "namespace")
        client = await open_client(url, client_options, where=where)
        store = cls(client, namespace=namespace, clock=clock)
        store._link.owns_client = True
        return store

    async def aclose(self) -> None:
        await self._link.close()

    # -- keys --------------------------------------------------------------------------------

    def _keys(self, conversation_id: str) -> Keys:
        return Keys(self._ns, _codec.check_id(conversation_id, "conversation id"))

    # -- conversations -----------------------------------------------------------------------

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        keys = self._keys(conversation_id)
        _codec.check_id(strategy, "strategy")
        encoded = _codec.encode(dict(meta or {}))
        created = repr(float(self._clock()))
        result = await self._link.run(
            self._create,
            [keys.info, self._index, f"{self._ns}:conversation-seq"],
            [conversation_id, strategy, encoded, created],
            noted=self._noted,
        )
        if result[0] == "exists":
            raise StoreError(f"conversation {conversation_id!r} already exists")
        outcome(result, keys)
        self._known.remember(conversation_id)

    @_watched
    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        keys = self._keys(conversation_id)
        [(strategy, meta, created)] = await self._link.read(
            lambda p: p.hmget(keys.info, ["strategy", "meta", "created_at"])
        )
        if strategy is None:
            raise _codec.missing_conversation(conversation_id)
        return ConversationInfo(conversation_id, strategy, _codec.decode(meta), float(created))

    async def list_conversations(self) -> list[str]:
        [ids] = await self._link.read(lambda p: p.zrange(self._index, 0, -1))
        return list(ids)

    @_watched
    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        keys = self._keys(conversation_id)
        while True:  # optimistic: a merge written by another client in between: merge again
            [stored] = await self._link.read(lambda p: p.hget(keys.info, "meta"))
            if stored is None:
                raise _codec.missing_conversation(conversation_id)
            merged = _codec.encode({**_codec.decode(stored), **meta})
            result = await self._link.run(
                self._set_meta, [keys.info], [stored, merged], noted=keys.noted
            )
            if result[0] != "changed":
                outcome(result, keys)
                return

    async def delete_conversation(self, conversation_id: str) -> None:
        keys = self._keys(conversation_id)
        result = await self._link.run(
            self._delete,
            [*keys.fixed(), self._index],
            [conversation_id, keys.tokens_prefix],
            noted=self._noted,
        )
        self._known.forget(conversation_id)
        outcome(result, keys)

    # -- nodes and heads ---------------------------------------------------------------------

    @_watched
    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        keys = self._keys(conversation_id)
        _codec.check_id(node_id, "node id")
        [data] = await self._link.conversation_read(keys, lambda p: p.hget(keys.nodes, node_id))
        if data is None:
            raise _codec.missing_node(conversation_id, node_id)
        return _codec.decode_node(data)

    @_watched
    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        keys = self._keys(conversation_id)
        head, order, nodes = await self._link.conversation_read(
            keys,
            lambda p: p.hget(keys.info, "head"),
            lambda p: p.lrange(keys.node_order, 0, -1),
            lambda p: p.hgetall(keys.nodes),
        )
        return _codec.graph_of(conversation_id, _codec.decode_nodes(nodes[i] for i in order), head)

    @_watched
    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        keys = self._keys(conversation_id)
        checked = _codec.check_limit(limit)
        leaf = "" if leaf_id is None else _codec.check_id(leaf_id, "node id")
        where = [keys.info, keys.nodes, keys.parents]
        result = await self._link.run(self._active_path, where, [leaf, checked or 0], read=True)
        return _codec.decode_nodes(reversed(outcome(result, keys)))

    @_watched
    async def get_head(self, conversation_id: str) -> str | None:
        keys = self._keys(conversation_id)
        [(strategy, head)] = await self._link.read(
            lambda p: p.hmget(keys.info, ["strategy", "head"])
        )
        if strategy is None:
            raise _codec.missing_conversation(conversation_id)
        return head if head is None else str(head)

    @_watched
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
        keys = self._keys(conversation_id)
        rows = _codec.encode_nodes(nodes)
        fenced = _codec.check_fence(fence)
        records = [_codec.attempt_row(r) for r in attempts]
        where, args = commit_call(
            keys,
            None if fenced is None else self._ledgers.key(fenced[0]),
            rows,
            [(attempt_id, data) for attempt_id, _, _, data in records],
            expected="" if expected_head is None else _codec.check_id(expected_head, "node id"),
            head="" if new_head is None else _codec.check_id(new_head, "node id"),
            version=0 if fenced is None else fenced[1],
        )
        result = await self._link.run(self._commit, where, args, noted=keys.noted)
        if result[0] == "fenced":
            assert fenced is not None
            stored = None if result[1] == "" else int(result[1])
            raise _codec.fenced_out(fenced[0], stored, fenced[1])
        if result[0] == "conflict":
            raise ConcurrentUpdateError(
                f"conversation {conversation_id!r}: head is {result[1] or None!r},"
                f" expected {expected_head!r}"
            )
        outcome(result, keys)

    # -- attempts ----------------------------------------------------------------------------

    @_watched
    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        keys = self._keys(conversation_id)
        attempt_id, _, _, data = _codec.attempt_row(record)
        result = await self._link.run(
            self._put_attempt,
            [keys.info, keys.attempts, keys.attempt_order],
            [attempt_id, data],
            noted=keys.noted,
        )
        outcome(result, keys)

    @_watched
    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        [data] = await self._link.conversation_read(
            keys, lambda p: p.hget(keys.attempts, attempt_id)
        )
        if data is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in conversation {conversation_id!r}"
            )
        return _codec.decode_attempt(data)

    @_watched
    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        keys = self._keys(conversation_id)
        if message_id is not None:
            _codec.check_id(message_id, "message id")
        order, stored = await self._link.conversation_read(
            keys,
            lambda p: p.lrange(keys.attempt_order, 0, -1),
            lambda p: p.hgetall(keys.attempts),
        )
        records = [(seq, _codec.decode_attempt(stored[i])) for seq, i in enumerate(order)]
        records.sort(key=lambda pair: _codec.start_order(pair[1].started_at, pair[0]))
        return [r for _, r in records if message_id is None or r.message_id == message_id]

    # -- paused runs -------------------------------------------------------------------------

    @_watched
    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        _codec.check_blob(blob)
        result = await self._link.run(
            self._hash_set, [keys.info, keys.runs], ["", attempt_id, blob], noted=keys.noted
        )
        outcome(result, keys)

    @_watched
    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        [blob] = await self._link.conversation_read(keys, lambda p: p.hget(keys.runs, attempt_id))
        return blob if blob is None else str(blob)

    @_watched
    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        result = await self._link.run(
            self._hash_delete, [keys.info, keys.runs], [attempt_id], noted=keys.noted
        )
        outcome(result, keys)

    # -- ledger and token counts (capabilities) -------------------------------------------

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        return await self._ledgers.get(key)

    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        return await self._ledgers.put(
            key, blob, expected_version=expected_version, holder=holder, held_until=held_until
        )

    async def delete_ledger(self, key: str) -> None:
        await self._ledgers.delete(key)

    @_watched
    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        await self._tokens.put(self._keys(conversation_id), encoding, counts)

    @_watched
    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        return await self._tokens.get(self._keys(conversation_id), encoding, node_ids)
