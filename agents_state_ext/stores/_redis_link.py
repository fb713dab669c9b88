"""RedisStore's line to the server: opening the client, running scripts and MULTI reads.

Whatever redis-py raises comes out as a one-line ``StoreError``, with no password in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from .._text import one_line, redact
from ..errors import StoreError
from . import _codec
from ._redis_scripts import Keys

__all__ = ["RedisLink", "one_line", "open_client", "redact"]


async def open_client(url: str, client_options: dict[str, Any], *, where: str) -> aioredis.Redis:
    """A client on ``url`` (``decode_responses`` always on) that answered a ping.

    ``where`` names the server in errors: ``redact(url)``.
    """
    try:
        client = aioredis.Redis.from_url(url, **{**client_options, "decode_responses": True})
    except (ValueError, TypeError, RedisError) as exc:
        raise StoreError(f"cannot use Redis URL {where}: {one_line(exc)}") from exc
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        raise StoreError(f"cannot connect to Redis at {where}: {one_line(exc)}") from exc
    return client


class RedisLink:
    """A ``decode_responses`` client as the store uses it; closed once, refusing work after.

    ``owns_client``: :meth:`close` closes the client too (the store opened it).
    """

    def __init__(self, client: aioredis.Redis) -> None:
        if not client.connection_pool.connection_kwargs.get("decode_responses"):
            raise StoreError("RedisStore needs a client created with decode_responses=True")
        self.client = client
        self.owns_client = False
        self.closed = False

    async def close(self) -> None:
        """Refuse work from now on, and close the client if it is ours; twice is fine."""
        if not self.closed:
            self.closed = True
            if self.owns_client:
                await self.client.aclose()

    async def run(self, script: Any, keys: Sequence[str], args: Sequence[Any]) -> list[Any]:
        """A script's whole answer: its status first."""
        with self._talk():
            return list(await script(keys=keys, args=args))

    async def read(self, *reads: Callable[[Any], object]) -> list[Any]:
        """The answers of several reads, taken together in one MULTI block."""
        with self._talk():
            async with self.client.pipeline(transaction=True) as pipe:
                for read in reads:
                    read(pipe)
                return list(await pipe.execute())

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
        except RedisError as exc:
            raise StoreError(f"Redis: {one_line(exc)}") from exc
        except UnicodeEncodeError as exc:  # raised while packing the command: nothing was sent
            raise StoreError(f"a value is not valid Unicode text: {one_line(exc)}") from exc
