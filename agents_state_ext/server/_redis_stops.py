""":class:`RedisStopBus`, the stop bus over Redis pub/sub (see :mod:`.stops` for the bus).

For several processes and machines. One pub/sub connection per bus carries every watched
conversation (channel
``<namespace>:stop:<conversation id>``), subscribed while at least one watch is open; a
watch is returned only once Redis has confirmed its subscription, so a stop published after
``watch()`` returned is delivered. Stops published while the connection is down are lost
(redis-py reconnects and resubscribes). Anyone who can publish on the Redis can send
anything: every message is checked (at most 1 KiB, a JSON object with a text
``attempt_id``) and anything else is logged and ignored; a reader that ends anyway is
logged and started again after a pause (0.1 s, doubling up to 5 s while readers keep
ending, back to 0.1 s once one reads a message), and :attr:`RedisStopBus.alive` says
whether it reads (``/api/health`` answers 503 while it does not).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from .._text import one_line, redact
from ..errors import StoreError, StoreUnavailableError
from ._stop_watches import StopWatch, Watches, check_id

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs 3.11; the package supports 3.10

__all__ = ["DEFAULT_NAMESPACE", "RedisStopBus"]

DEFAULT_NAMESPACE = "agents-state-ext"
"""The channel prefix :class:`RedisStopBus` uses unless told otherwise (as ``RedisStore``)."""

# The bus's log is the stop bus module's, wherever its Redis half lives.
logger = logging.getLogger("agents_state_ext.server.stops")

_SUBSCRIBE_TIMEOUT = 10.0  # seconds Redis gets to confirm a subscription before watch() fails
_MAX_MESSAGE = 1024  # characters: a stop request is {"attempt_id": "..."}; anything longer is junk
_MAX_ID = 256
_RESTART_FIRST = 0.1  # seconds before a reader that ended is started again
_RESTART_MAX = 5.0  # the longest pause, while readers keep ending


@contextlib.contextmanager
def _unavailable(doing: str) -> Iterator[None]:
    """Turn redis-py's connection and timeout errors into ``StoreUnavailableError``."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailableError(f"the stop bus cannot {doing}: {one_line(exc)}") from exc


def _stop_request(data: object) -> str | None:
    """The attempt id of a stop request's text, or ``None`` for anything else (bounded)."""
    if not isinstance(data, str) or len(data) > _MAX_MESSAGE:
        return None
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        return None
    attempt_id = parsed.get("attempt_id") if isinstance(parsed, dict) else None
    if not isinstance(attempt_id, str) or not 0 < len(attempt_id) <= _MAX_ID:
        return None
    return attempt_id


class RedisStopBus:
    """A stop bus over Redis pub/sub, shared by every worker (see the module).

    Open one with :meth:`connect`, or wrap a ``redis.asyncio.Redis`` of your own (created with
    ``decode_responses=True``; closing it is then left to you). ``namespace`` prefixes every
    channel, so several deployments can share a Redis.
    """

    def __init__(self, client: Any, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        if not client.get_connection_kwargs().get("decode_responses"):
            raise StoreError("RedisStopBus needs a client created with decode_responses=True")
        self._client = client
        self._namespace = check_id(namespace, "namespace")
        self._prefix = f"{namespace}:stop:"
        self._owns_client = False
        self._watches = Watches()
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # orders (un)subscribe commands with the watch bookkeeping
        # channel -> subscription confirmations awaited, in the order the SUBSCRIBEs were sent
        self._confirmations: dict[str, list[asyncio.Future[None]]] = {}
        # channel -> the confirmation of its current subscription (while a watch is open)
        self._ready: dict[str, asyncio.Future[None]] = {}
        self._closed = False
        self._restarts = 0
        self._restart_delay = _RESTART_FIRST
        self._restart: asyncio.TimerHandle | None = None  # a reader's restart, while pending

    @classmethod
    async def connect(
        cls, url: str, *, namespace: str = DEFAULT_NAMESPACE, **client_options: Any
    ) -> RedisStopBus:
        """Connect to ``url`` (``redis://host:6379/0``, ``rediss://``, ``unix://``) and ping it.

        ``client_options`` go to ``redis.asyncio.Redis.from_url`` (``decode_responses`` is
        always on, ``encoding_errors`` is ``"replace"`` unless given; ``client_name`` names
        the connections in ``CLIENT LIST``). An address that
        does not answer is ``StoreError``; :meth:`aclose` closes the client.
        """
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:
            raise StoreError(
                'RedisStopBus needs redis-py: pip install "agents-state-ext[redis]"'
            ) from exc
        from redis.exceptions import RedisError

        where = redact(url)
        try:
            # A published message that is not UTF-8 reads as U+FFFD (then is ignored as
            # malformed) instead of failing every later read of the connection.
            options = {"encoding_errors": "replace", **client_options, "decode_responses": True}
            client = aioredis.Redis.from_url(url, **options)
        except (ValueError, TypeError, RedisError) as exc:
            raise StoreError(f"cannot use Redis URL {where}: {one_line(exc)}") from exc
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            await client.aclose()
            raise StoreError(f"cannot connect to Redis at {where}: {one_line(exc)}") from exc
        bus = cls(client, namespace=namespace)
        bus._owns_client = True
        return bus

    def channel(self, conversation_id: str) -> str:
        """The pub/sub channel of a conversation's stop requests."""
        return self._prefix + conversation_id

    async def request_stop(self, conversation_id: str, attempt_id: str) -> int:
        """Publish the request; how many workers were subscribed to the conversation."""
        check_id(conversation_id, "conversation id")
        check_id(attempt_id, "attempt id")
        self._check_open()
        message = json.dumps({"attempt_id": attempt_id})
        with _unavailable("publish a stop request"):
            return int(await self._client.publish(self.channel(conversation_id), message))

    def watch(self, conversation_id: str) -> AbstractAsyncContextManager[StopWatch]:
        """Receive the conversation's stop requests while the ``async with`` lasts.

        The subscription is confirmed by Redis before the watch is returned;
        ``StoreUnavailableError`` if it is not within 10 seconds, or Redis cannot be reached.
        """
        check_id(conversation_id, "conversation id")
        return self._watch(conversation_id)

    @contextlib.asynccontextmanager
    async def _watch(self, conversation_id: str) -> AsyncIterator[StopWatch]:
        watch = StopWatch(conversation_id)
        await self._add(watch)
        try:
            yield watch
        finally:
            await self._remove(watch)

    async def _add(self, watch: StopWatch) -> None:
        self._check_open()
        channel = self.channel(watch.conversation_id)
        async with self._lock:
            if self._watches.add(watch):  # the first watch of its conversation: subscribe
                ready = asyncio.get_running_loop().create_future()
                self._confirmations.setdefault(channel, []).append(ready)
                try:
                    with _unavailable("subscribe to stop requests"):
                        await self._subscribe(channel)
                except BaseException:
                    self._watches.remove(watch)
                    self._drop_confirmation(channel, ready)
                    raise
                self._ready[channel] = ready
            else:  # subscribed already, or being subscribed for an earlier watch
                ready = self._ready[channel]
        try:
            await asyncio.wait_for(asyncio.shield(ready), _SUBSCRIBE_TIMEOUT)
        except asyncio.TimeoutError:
            await self._remove(watch)
            raise StoreUnavailableError(
                f"Redis did not confirm the subscription to {channel!r} in "
                f"{_SUBSCRIBE_TIMEOUT:g} seconds"
            ) from None
        except BaseException:
            await self._remove(watch)
            raise

    async def _subscribe(self, channel: str) -> None:
        if self._pubsub is None:
            self._pubsub = self._client.pubsub()
            await self._pubsub.subscribe(channel)
            self._start_reader()
        else:
            await self._pubsub.subscribe(channel)

    async def _remove(self, watch: StopWatch) -> None:
        async with self._lock:
            if not self._watches.remove(watch):
                return
            channel = self.channel(watch.conversation_id)
            self._ready.pop(channel, None)
            if self._pubsub is not None and not self._closed:
                try:
                    await self._pubsub.unsubscribe(channel)
                except Exception as exc:  # the channel stays subscribed: harmless, logged
                    logger.warning("could not unsubscribe from stop channel: %s", exc)

    def _drop_confirmation(self, channel: str, confirmed: asyncio.Future[None]) -> None:
        waiting = self._confirmations.get(channel, [])
        if confirmed in waiting:
            waiting.remove(confirmed)
        if not waiting:
            self._confirmations.pop(channel, None)

    async def _read(self) -> None:
        """Dispatch every message of the shared pub/sub connection, until the bus closes."""
        backoff = 0.1
        while True:
            try:
                message = await self._pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except UnicodeDecodeError:
                # Bytes that are not UTF-8, read by a client that decodes strictly (one of
                # your own; connect() replaces them): redis-py would read the same frame again
                # forever. A new connection drops it (redis-py subscribes again).
                logger.warning("dropped a stop bus message that is not UTF-8; reconnecting")
                connection = getattr(self._pubsub, "connection", None)
                if connection is not None:
                    await connection.disconnect()
                continue
            except Exception as exc:  # redis-py retried already: wait, then read again
                logger.warning("stop bus lost its Redis connection: %s", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            self._restart_delay = _RESTART_FIRST  # this reader reads: the next pause is short
            if message is not None:
                try:
                    self._dispatch(message)
                except Exception:  # one bad message must not end the reader
                    logger.exception("the stop bus could not handle a message; reading on")

    async def ping(self) -> None:
        """Ask Redis for an answer; ``StoreUnavailableError`` if it gives none (``/api/health``)."""
        self._check_open()
        with _unavailable("reach Redis"):
            await self._client.ping()

    @property
    def alive(self) -> bool:
        """Whether stops can arrive: open, and reading whenever a conversation is watched."""
        if self._closed or self._restart is not None:
            return False
        return self._reader is None or not self._reader.done()

    @property
    def reader_restarts(self) -> int:
        """How many times a reader that ended was started again."""
        return self._restarts

    def _start_reader(self) -> None:
        self._restart = None
        if self._closed:
            return
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self._reader.add_done_callback(self._reader_ended)

    def _reader_ended(self, task: asyncio.Task[None]) -> None:
        if self._closed or task is not self._reader:
            return
        error = None if task.cancelled() else task.exception()
        delay = self._restart_delay
        logger.error("the stop bus reader ended (%r); starting it again in %gs", error, delay)
        self._restarts += 1
        # A pause, doubling while readers keep ending: a reader that dies at once must not
        # spin the event loop (or the log); stops published meanwhile wait on the connection.
        self._restart_delay = min(delay * 2, _RESTART_MAX)
        self._restart = asyncio.get_running_loop().call_later(delay, self._start_reader)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind, channel = message.get("type"), message.get("channel")
        if not isinstance(channel, str) or not channel.startswith(self._prefix):
            return
        if kind == "subscribe":
            waiting = self._confirmations.get(channel)
            if waiting:  # Redis confirms subscriptions in the order they were asked
                confirmed = waiting.pop(0)
                if not confirmed.done():
                    confirmed.set_result(None)
                if not waiting:
                    del self._confirmations[channel]
        elif kind == "message":
            attempt_id = _stop_request(message.get("data"))
            if attempt_id is None:
                logger.warning("ignored a malformed stop request on %r", channel[:200])
                return
            self._watches.deliver(channel[len(self._prefix) :], attempt_id)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this RedisStopBus is closed")

    async def aclose(self) -> None:
        """Stop reading, close the pub/sub connection (and the client :meth:`connect` made)."""
        if self._closed:
            return
        self._closed = True
        if self._restart is not None:
            self._restart.cancel()
            self._restart = None
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._pubsub is not None:
            await self._pubsub.aclose()
        for waiting in self._confirmations.values():
            for confirmed in waiting:
                confirmed.cancel()
        self._confirmations.clear()
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
