"""RedisStore's line to the server: opening the client, running scripts and MULTI reads.

Whatever redis-py raises comes out as a one-line ``StoreError``, with no password in it:
``StoreUnavailableError`` for a refused, cut or timed-out connection (and a Redis still
loading its data). redis-py's own retries are off on the clients :func:`open_client` makes: a
script that changes data is never sent twice (a commit applied and then retried would report a
lost compare-and-set it won). Reads, which can be repeated safely, are tried once more after a
lost connection; a pooled connection that died meanwhile is replaced when it is next taken.
A write whose connection broke is looked up on the server instead (``_redis_outcome``): applied,
it returns as stored; not applied, it is sent once more.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._text import one_line, redact
from ..errors import StoreError, StoreUnavailableError, StoreValueError
from . import _codec
from ._redis_keys import Keys
from ._redis_outcome import LOOKUP, TTL_MS, Outcome, lookup

__all__ = ["CLIENT_DEFAULTS", "RedisLink", "one_line", "open_client", "redact"]

CLIENT_DEFAULTS: dict[str, Any] = {
    "socket_timeout": 10.0,
    "socket_connect_timeout": 5.0,
    "health_check_interval": 30,
}
"""Options of the clients :func:`open_client` makes, unless given: no call waits on a silent
server for more than ``socket_timeout`` seconds, and a connection idle for
``health_check_interval`` seconds is pinged before it is used."""

_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)


async def open_client(url: str, client_options: dict[str, Any], *, where: str) -> aioredis.Redis:
    """A client on ``url`` (``decode_responses`` always on) that answered a ping.

    ``where`` names the server in errors: ``redact(url)``. ``client_options`` override
    :data:`CLIENT_DEFAULTS`; without a ``retry`` of theirs, redis-py retries nothing.
    """
    options = {"retry": Retry(NoBackoff(), 0), **CLIENT_DEFAULTS, **client_options}
    try:
        client = aioredis.Redis.from_url(url, **{**options, "decode_responses": True})
    except (ValueError, TypeError, RedisError) as exc:
        raise StoreError(f"cannot use Redis URL {where}: {one_line(exc)}") from exc
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        error = StoreUnavailableError if isinstance(exc, _UNAVAILABLE) else StoreError
        raise error(f"cannot connect to Redis at {where}: {one_line(exc)}") from exc
    return client


class RedisLink:
    """A ``decode_responses`` client as the store uses it; closed once, refusing work after.

    ``owns_client``: :meth:`close` closes the client too (the store opened it).
    """

    def __init__(self, client: aioredis.Redis, *, epoch_key: str | None = None) -> None:
        if not client.connection_pool.connection_kwargs.get("decode_responses"):
            raise StoreError("RedisStore needs a client created with decode_responses=True")
        self.client = client
        self.owns_client = False
        self.closed = False
        self.epoch_key = epoch_key
        self.epoch: str | None = None
        self._lookup: Any = None

    async def close(self) -> None:
        """Refuse work from now on, and close the client if it is ours; twice is fine."""
        if not self.closed:
            self.closed = True
            if self.owns_client:
                await self.client.aclose()

    async def run(
        self,
        script: Any,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        read: bool = False,
        noted: Sequence[str] = (),
    ) -> list[Any]:
        """A script's whole answer: its status first (``read``: it changes nothing).

        A write is a script wrapped by ``_redis_outcome.recorded``, noted at ``noted`` (its
        outcomes hash and times): when its connection breaks or times out, the note tells
        whether it was applied (its answer is returned, as stored) or not (it is sent once
        more after a lost connection, under a new id; else ``StoreUnavailableError``).
        """
        await self._first_use()
        if not read:
            return await self._write(script, keys, args, noted)
        try:
            with self._talk():
                return list(await script(keys=keys, args=args))
        except StoreUnavailableError as exc:
            if not _lost_connection(exc):
                raise
        with self._talk():
            return list(await script(keys=keys, args=args))

    async def _write(
        self, script: Any, keys: Sequence[str], args: Sequence[Any], noted: Sequence[str]
    ) -> list[Any]:
        for retried in (False, True):
            commit_id = uuid.uuid4().hex
            try:
                with self._talk():
                    return list(await script(keys=[*keys, *noted], args=[*args, commit_id, TTL_MS]))
            except StoreUnavailableError as exc:
                found: Outcome = "not applied"
                answer: list[Any] = []
                if not _never_sent(exc):
                    if self._lookup is None:
                        self._lookup = self.client.register_script(LOOKUP)
                    found, answer = await lookup(self._lookup, noted, commit_id)
                if found == "applied":
                    return answer
                if retried or found == "unknown" or not _lost_connection(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def read(self, *reads: Callable[[Any], object]) -> list[Any]:
        """The answers of several reads, taken together in one MULTI block.

        Tried once more after a lost connection (only reads, and idempotent deletes, go here).
        """
        await self._first_use()
        try:
            return await self._multi(reads)
        except StoreUnavailableError as exc:
            if not _lost_connection(exc):
                raise
        return await self._multi(reads)

    async def _multi(self, reads: Sequence[Callable[[Any], object]]) -> list[Any]:
        with self._talk():
            async with self.client.pipeline(transaction=True) as pipe:
                for read in reads:
                    read(pipe)
                return list(await pipe.execute())

    async def _first_use(self) -> None:
        """Learn the namespace's epoch mark, leaving one if there is none (see ``lost``)."""
        if self.epoch is None and self.epoch_key is not None:
            proposed = uuid.uuid4().hex
            with self._talk():
                stored = await self.client.set(self.epoch_key, proposed, nx=True, get=True)
            self.epoch = proposed if stored is None else str(stored)

    async def lost(self) -> bool:
        """Whether the namespace's epoch mark is not the one this link first saw.

        The mark is left on first use and never removed or changed, so a different or missing
        one means the server lost its data (a restart without persistence, a ``FLUSHALL``)
        since then.
        """
        key = self.epoch_key
        if key is None or self.epoch is None:
            return False
        [stored] = await self.read(lambda p: p.get(key))
        return bool(stored != self.epoch)

    async def conversation_read(self, keys: Keys, *reads: Callable[[Any], object]) -> list[Any]:
        """``reads``, after checking in the same snapshot that the conversation exists."""
        exists, *answers = await self.read(lambda p: p.exists(keys.info), *reads)
        if not exists:
            raise _codec.missing_conversation(keys.id)
        return answers

    @contextmanager
    def _talk(self) -> Iterator[None]:
        """Refuse work once closed; turn what redis-py raises into a one-line ``StoreError``."""
        if self.closed:
            raise StoreError("the store is closed")
        try:
            yield
        except _UNAVAILABLE as exc:
            raise StoreUnavailableError(f"Redis: {one_line(exc)}") from exc
        except RedisError as exc:
            raise StoreError(f"Redis: {one_line(exc)}") from exc
        except UnicodeEncodeError as exc:  # raised while packing the command: nothing was sent
            raise StoreValueError(f"a value is not valid Unicode text: {one_line(exc)}") from exc


def _never_sent(error: StoreUnavailableError) -> bool:
    """Whether ``error`` is a connection that could not be made: the script was never sent."""
    cause = error.__cause__
    return isinstance(cause, RedisConnectionError) and "connecting to" in str(cause)


def _lost_connection(error: StoreUnavailableError) -> bool:
    """Whether ``error`` is a connection that broke (not a timeout: the server may be stuck)."""
    cause = error.__cause__
    return isinstance(cause, (RedisConnectionError, ConnectionResetError, BrokenPipeError))
