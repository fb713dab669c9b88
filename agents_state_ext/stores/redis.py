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

The braces in ``C`` are a Redis Cluster hash tag: every key of one conversation, its ledger
included, hashes to one slot, which is what a cluster needs for the per-conversation scripts.
Only ``create_conversation`` and ``delete_conversation`` also touch the two ``ns:conversation*``
keys; on a cluster they would have to update that index apart. This store targets one primary.

Durability: Redis keeps data only as its persistence is configured. With neither RDB snapshots
nor the append-only file, a restart loses every conversation (the CI's Redis keeps nothing on
disk). ``appendonly yes`` with ``appendfsync always`` loses no acknowledged write on a crash,
at the cost of an fsync per write; ``appendfsync everysec`` may lose the last second. Replication
is asynchronous: a failover to a replica can lose writes the primary acknowledged, a won
compare-and-set among them, so two workers may both believe they moved a head. Use PostgreSQL
as the system of record; Redis suits shared, short-lived conversations and caches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ..attempts import AttemptRecord
from ..errors import ConcurrentUpdateError, StoreError
from ..graph import ConversationGraph
from ..nodes import Node
from . import _codec
from .base import AttemptNotFoundError, ConversationInfo, LedgerRecord, StoreBase

__all__ = ["DEFAULT_NAMESPACE", "RedisStore"]

DEFAULT_NAMESPACE = "agents-state-ext"

# Every script answers a table whose first element says how it went: "ok" (then the results),
# or the reason nothing was written, turned into the library's error by ``_outcome``.

_CREATE = """#!lua
-- KEYS: info, index, seq. ARGV: id, strategy, meta, created_at.
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'strategy', ARGV[2], 'meta', ARGV[3], 'created_at', ARGV[4])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
return {'ok'}
"""

_COMMIT = """#!lua
-- KEYS: info, nodes, parents, node-order, attempts, attempt-order.
-- ARGV: expected head, new head ('' for none), '1' if the new head is among the nodes written,
-- the node count n, n times (id, parent id or '', JSON), then pairs (attempt id, JSON).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
local head = redis.call('HGET', KEYS[1], 'head') or ''
if head ~= ARGV[1] then return {'conflict', head} end
local new_head = ARGV[2]
if new_head ~= '' and ARGV[3] == '0' and redis.call('HEXISTS', KEYS[2], new_head) == 0 then
  return {'no-node', new_head}
end
local i = 5
for _ = 1, tonumber(ARGV[4]) do
  if redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2]) == 1 then
    redis.call('RPUSH', KEYS[4], ARGV[i])
  end
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 3
end
while i < #ARGV do
  if redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('RPUSH', KEYS[6], ARGV[i])
  end
  i = i + 2
end
if new_head == '' then
  redis.call('HDEL', KEYS[1], 'head')
else
  redis.call('HSET', KEYS[1], 'head', new_head)
end
return {'ok'}
"""

# The walk is bounded by the node count: a longer chain must repeat a node, a cycle.
_ACTIVE_PATH = """#!lua flags=no-writes
-- KEYS: info, nodes, parents. ARGV: leaf ('' for the head), limit (0 for none).
-- Answers the node JSONs from the leaf up.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
local id = ARGV[1]
if id == '' then
  id = redis.call('HGET', KEYS[1], 'head')
  if not id then return {'ok'} end
end
if redis.call('HEXISTS', KEYS[2], id) == 0 then return {'no-node', id} end
local limit = tonumber(ARGV[2])
local bound = redis.call('HLEN', KEYS[3])
local out = {'ok'}
local steps = 0
while id ~= '' and (limit == 0 or steps < limit) do
  local data = redis.call('HGET', KEYS[2], id)
  local parent = redis.call('HGET', KEYS[3], id)
  if steps >= bound or not data or not parent then return {'broken', id} end
  steps = steps + 1
  out[steps + 1] = data
  id = parent
end
return out
"""

_PUT_ATTEMPT = """#!lua
-- KEYS: info, attempts, attempt-order. ARGV: attempt id, JSON.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
if redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
return {'ok'}
"""

_SET_META = """#!lua
-- KEYS: info. ARGV: the meta read, the merged meta. Writes only if nobody changed it since.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
if redis.call('HGET', KEYS[1], 'meta') ~= ARGV[1] then return {'changed'} end
redis.call('HSET', KEYS[1], 'meta', ARGV[2])
return {'ok'}
"""

_HASH_SET = """#!lua
-- KEYS: info, a hash of the conversation, and optionally a set. ARGV: the set member
-- (or ''), then field/value pairs (one HSET each: unpack() of a long list overflows Lua's stack).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
for i = 2, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
if KEYS[3] and #ARGV > 1 then redis.call('SADD', KEYS[3], ARGV[1]) end
return {'ok'}
"""

_HASH_DELETE = """#!lua
-- KEYS: info, a hash of the conversation. ARGV: the field.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
redis.call('HDEL', KEYS[2], ARGV[1])
return {'ok'}
"""

_DELETE = """#!lua
-- KEYS: info, nodes, parents, node-order, attempts, attempt-order, runs, encodings, ledger,
-- index. ARGV: id, the prefix of its token-count keys.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
for _, encoding in ipairs(redis.call('SMEMBERS', KEYS[8])) do
  redis.call('DEL', ARGV[2] .. encoding)
end
redis.call('DEL', unpack(KEYS, 1, 9))
redis.call('ZREM', KEYS[10], ARGV[1])
return {'ok'}
"""

_PUT_LEDGER = """#!lua
-- KEYS: ledger. ARGV: expected version, blob, holder ('' for none), held_until ('' for none).
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return {'conflict', version} end
redis.call('HSET', KEYS[1], 'blob', ARGV[2], 'version', version + 1)
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], 'holder')
else redis.call('HSET', KEYS[1], 'holder', ARGV[3]) end
if ARGV[4] == '' then redis.call('HDEL', KEYS[1], 'held_until')
else redis.call('HSET', KEYS[1], 'held_until', ARGV[4]) end
return {'ok', version + 1}
"""


class _Keys:
    """The keys of one conversation (see the module docstring)."""

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

    def tokens(self, encoding: str) -> str:
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
        ]


def _redact(url: str) -> str:
    """``url`` without its password, for error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = f"{parts.username or ''}:***@"
        return urlunsplit(parts._replace(netloc=user + parts.netloc.rpartition("@")[2]))
    except ValueError:
        return "<unparsable URL>"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


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
        if not client.connection_pool.connection_kwargs.get("decode_responses"):
            raise StoreError("RedisStore needs a client created with decode_responses=True")
        self._client = client
        self._owns_client = False
        self._clock = clock or time.time
        self._closed = False
        self._index = f"{self._ns}:conversations"
        script = client.register_script
        self._create, self._commit = script(_CREATE), script(_COMMIT)
        self._active_path = script(_ACTIVE_PATH)
        self._put_attempt, self._set_meta = script(_PUT_ATTEMPT), script(_SET_META)
        self._hash_set, self._hash_delete = script(_HASH_SET), script(_HASH_DELETE)
        self._delete, self._put_ledger = script(_DELETE), script(_PUT_LEDGER)

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
        where = _redact(url)
        _codec.check_id(namespace, "namespace")
        try:
            client = aioredis.Redis.from_url(url, **{**client_options, "decode_responses": True})
        except (ValueError, TypeError, RedisError) as exc:
            raise StoreError(f"cannot use Redis URL {where}: {_one_line(exc)}") from exc
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            await client.aclose()
            raise StoreError(f"cannot connect to Redis at {where}: {_one_line(exc)}") from exc
        store = cls(client, namespace=namespace, clock=clock)
        store._owns_client = True
        return store

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns_client:
                await self._client.aclose()

    # -- plumbing ----------------------------------------------------------------------------

    @contextmanager
    def _talk(self) -> Iterator[None]:
        """Refuse work once closed; turn what redis-py raises into a one-line ``StoreError``."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            yield
        except RedisError as exc:
            raise StoreError(f"Redis: {_one_line(exc)}") from exc
        except UnicodeEncodeError as exc:  # raised while packing the command: nothing was sent
            raise StoreError(f"a value is not valid Unicode text: {_one_line(exc)}") from exc

    def _keys(self, conversation_id: str) -> _Keys:
        return _Keys(self._ns, _codec.check_id(conversation_id, "conversation id"))

    def _ledger_key(self, key: str) -> str:
        return _Keys(self._ns, _codec.check_id(key, "ledger key")).ledger

    async def _run(self, script: Any, keys: Sequence[str], args: Sequence[Any]) -> list[Any]:
        """A script's whole answer: its status first."""
        with self._talk():
            return list(await script(keys=keys, args=args))

    async def _read(self, *reads: Callable[[Any], object]) -> list[Any]:
        """The answers of several reads, taken together in one MULTI block."""
        with self._talk():
            async with self._client.pipeline(transaction=True) as pipe:
                for read in reads:
                    read(pipe)
                return list(await pipe.execute())

    @staticmethod
    def _outcome(result: list[Any], keys: _Keys) -> list[Any]:
        """A script's answer after its status, or the error that status stands for."""
        status, rest = result[0], result[1:]
        if status == "ok":
            return rest
        if status == "no-conversation":
            raise _codec.missing_conversation(keys.id)
        if status == "no-node":
            raise _codec.missing_node(keys.id, rest[0])
        if status == "broken":
            raise _codec.broken_chain(keys.id, rest[0])
        raise StoreError(f"conversation {keys.id!r}: unexpected answer from Redis: {status!r}")

    async def _conversation_read(self, keys: _Keys, *reads: Callable[[Any], object]) -> list[Any]:
        """``reads``, after checking in the same snapshot that the conversation exists."""
        exists, *answers = await self._read(lambda p: p.exists(keys.info), *reads)
        if not exists:
            raise _codec.missing_conversation(keys.id)
        return answers

    # -- conversations -----------------------------------------------------------------------

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        keys = self._keys(conversation_id)
        _codec.check_id(strategy, "strategy")
        encoded = _codec.encode(dict(meta or {}))
        created = repr(float(self._clock()))
        result = await self._run(
            self._create,
            [keys.info, self._index, f"{self._ns}:conversation-seq"],
            [conversation_id, strategy, encoded, created],
        )
        if result[0] == "exists":
            raise StoreError(f"conversation {conversation_id!r} already exists")
        self._outcome(result, keys)

    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        keys = self._keys(conversation_id)
        [(strategy, meta, created)] = await self._read(
            lambda p: p.hmget(keys.info, ["strategy", "meta", "created_at"])
        )
        if strategy is None:
            raise _codec.missing_conversation(conversation_id)
        return ConversationInfo(conversation_id, strategy, _codec.decode(meta), float(created))

    async def list_conversations(self) -> list[str]:
        [ids] = await self._read(lambda p: p.zrange(self._index, 0, -1))
        return list(ids)

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        keys = self._keys(conversation_id)
        while True:  # optimistic: a merge written by another client in between: merge again
            [stored] = await self._read(lambda p: p.hget(keys.info, "meta"))
            if stored is None:
                raise _codec.missing_conversation(conversation_id)
            merged = _codec.encode({**_codec.decode(stored), **meta})
            result = await self._run(self._set_meta, [keys.info], [stored, merged])
            if result[0] != "changed":
                self._outcome(result, keys)
                return

    async def delete_conversation(self, conversation_id: str) -> None:
        keys = self._keys(conversation_id)
        result = await self._run(
            self._delete, [*keys.fixed(), self._index], [conversation_id, keys.tokens_prefix]
        )
        self._outcome(result, keys)

    # -- nodes and heads ---------------------------------------------------------------------

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        keys = self._keys(conversation_id)
        _codec.check_id(node_id, "node id")
        [data] = await self._conversation_read(keys, lambda p: p.hget(keys.nodes, node_id))
        if data is None:
            raise _codec.missing_node(conversation_id, node_id)
        return _codec.decode_node(data)

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        keys = self._keys(conversation_id)
        head, order, nodes = await self._conversation_read(
            keys,
            lambda p: p.hget(keys.info, "head"),
            lambda p: p.lrange(keys.node_order, 0, -1),
            lambda p: p.hgetall(keys.nodes),
        )
        return _codec.graph_of(conversation_id, _codec.decode_nodes(nodes[i] for i in order), head)

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        keys = self._keys(conversation_id)
        checked = _codec.check_limit(limit)
        leaf = "" if leaf_id is None else _codec.check_id(leaf_id, "node id")
        result = await self._run(
            self._active_path, [keys.info, keys.nodes, keys.parents], [leaf, checked or 0]
        )
        return _codec.decode_nodes(reversed(self._outcome(result, keys)))

    async def get_head(self, conversation_id: str) -> str | None:
        keys = self._keys(conversation_id)
        [(strategy, head)] = await self._read(lambda p: p.hmget(keys.info, ["strategy", "head"]))
        if strategy is None:
            raise _codec.missing_conversation(conversation_id)
        return head if head is None else str(head)

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        keys = self._keys(conversation_id)
        rows = _codec.encode_nodes(nodes)
        records = [_codec.attempt_row(r) for r in attempts]
        expected = "" if expected_head is None else _codec.check_id(expected_head, "node id")
        head = "" if new_head is None else _codec.check_id(new_head, "node id")
        written = "1" if any(node_id == head for node_id, _, _ in rows) else "0"
        args: list[str | int] = [expected, head, written, len(rows)]
        for node_id, parent_id, data in rows:
            args += [node_id, parent_id or "", data]
        for attempt_id, _, _, data in records:
            args += [attempt_id, data]
        result = await self._run(
            self._commit,
            [
                keys.info,
                keys.nodes,
                keys.parents,
                keys.node_order,
                keys.attempts,
                keys.attempt_order,
            ],
            args,
        )
        if result[0] == "conflict":
            raise ConcurrentUpdateError(
                f"conversation {conversation_id!r}: head is {result[1] or None!r},"
                f" expected {expected_head!r}"
            )
        self._outcome(result, keys)

    # -- attempts ----------------------------------------------------------------------------

    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        keys = self._keys(conversation_id)
        attempt_id, _, _, data = _codec.attempt_row(record)
        result = await self._run(
            self._put_attempt, [keys.info, keys.attempts, keys.attempt_order], [attempt_id, data]
        )
        self._outcome(result, keys)

    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        [data] = await self._conversation_read(keys, lambda p: p.hget(keys.attempts, attempt_id))
        if data is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in conversation {conversation_id!r}"
            )
        return _codec.decode_attempt(data)

    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        keys = self._keys(conversation_id)
        if message_id is not None:
            _codec.check_id(message_id, "message id")
        order, stored = await self._conversation_read(
            keys,
            lambda p: p.lrange(keys.attempt_order, 0, -1),
            lambda p: p.hgetall(keys.attempts),
        )
        records = [(seq, _codec.decode_attempt(stored[i])) for seq, i in enumerate(order)]
        records.sort(key=lambda pair: _codec.start_order(pair[1].started_at, pair[0]))
        return [r for _, r in records if message_id is None or r.message_id == message_id]

    # -- paused runs -------------------------------------------------------------------------

    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        _codec.check_blob(blob)
        result = await self._run(self._hash_set, [keys.info, keys.runs], ["", attempt_id, blob])
        self._outcome(result, keys)

    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        [blob] = await self._conversation_read(keys, lambda p: p.hget(keys.runs, attempt_id))
        return blob if blob is None else str(blob)

    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        keys = self._keys(conversation_id)
        _codec.check_id(attempt_id, "attempt id")
        result = await self._run(self._hash_delete, [keys.info, keys.runs], [attempt_id])
        self._outcome(result, keys)

    # -- ledger (capability) -----------------------------------------------------------------

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        ledger = self._ledger_key(key)
        [(blob, version, holder, until)] = await self._read(
            lambda p: p.hmget(ledger, ["blob", "version", "holder", "held_until"])
        )
        if blob is None:
            return None
        return LedgerRecord(blob, int(version), holder, None if until is None else float(until))

    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        ledger = self._ledger_key(key)
        _codec.check_blob(blob)
        expected = _codec.check_version(expected_version)
        holder, until = _codec.check_hold(holder, held_until)
        stored_until = "" if until is None else repr(until)
        result = await self._run(
            self._put_ledger, [ledger], [expected, blob, holder or "", stored_until]
        )
        if result[0] == "conflict":
            raise _codec.ledger_conflict(key, int(result[1]), expected)
        return int(result[1])

    async def delete_ledger(self, key: str) -> None:
        ledger = self._ledger_key(key)
        await self._read(lambda p: p.delete(ledger))

    # -- token counts (capability) -----------------------------------------------------------

    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        keys = self._keys(conversation_id)
        checked = _codec.check_counts(encoding, counts)
        args: list[str | int] = [encoding]
        for node_id, count in checked.items():
            args += [node_id, count]
        result = await self._run(
            self._hash_set, [keys.info, keys.tokens(encoding), keys.encodings], args
        )
        self._outcome(result, keys)

    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        keys = self._keys(conversation_id)
        tokens = keys.tokens(_codec.check_id(encoding, "encoding"))
        if node_ids is None:
            [stored] = await self._conversation_read(keys, lambda p: p.hgetall(tokens))
            return {node_id: int(count) for node_id, count in stored.items()}
        wanted = [_codec.check_id(i, "node id") for i in node_ids]
        if not wanted:
            await self._conversation_read(keys)
            return {}
        [found] = await self._conversation_read(keys, lambda p: p.hmget(tokens, wanted))
        return {i: int(n) for i, n in zip(wanted, found, strict=True) if n is not None}
