"""The stop bus: a stop asked on any worker reaches the worker that streams the attempt.

The worker that streams an attempt watches its conversation for the length of the stream::

    async with bus.watch(conversation_id) as watch:
        stop = asyncio.ensure_future(watch.requested(attempt_id))
        ...  # stream; when `stop` is done, stop the attempt

and any worker asks for a stop with ``await bus.request_stop(conversation_id, attempt_id)``.
Delivery is at most once and only to watches open when the request is published: a stop asked
while nobody watches the conversation is not kept (the app checks the store for that case: an
attempt still in flight there with no live lease on its conversation was left by a dead worker).

- :class:`LocalStopBus`: in one process (one worker) — this module.
- :class:`RedisStopBus`: Redis pub/sub, for several processes and machines
  (:mod:`._redis_stops` says how it subscribes, checks messages and restarts its reader).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from ._redis_stops import DEFAULT_NAMESPACE, RedisStopBus
from ._stop_watches import StopWatch, Watches, check_id

__all__ = [
    "DEFAULT_NAMESPACE",
    "LocalStopBus",
    "RedisStopBus",
    "StopBus",
    "StopWatch",
]


@runtime_checkable
class StopBus(Protocol):
    """Carries stop requests from any worker to the worker that streams the attempt."""

    async def request_stop(self, conversation_id: str, attempt_id: str) -> int:
        """Ask whoever watches the conversation to stop ``attempt_id``.

        How many receivers it reached (local: open watches; Redis: subscribed workers); ``0``
        means nobody was watching and the request is gone.
        """
        ...

    def watch(self, conversation_id: str) -> AbstractAsyncContextManager[StopWatch]:
        """Receive the conversation's stop requests while the ``async with`` lasts."""
        ...

    async def aclose(self) -> None:
        """Release the bus's resources; calling it twice is fine."""
        ...


class LocalStopBus:
    """A stop bus inside one process: correct only when a single worker serves every request."""

    def __init__(self) -> None:
        self._watches = Watches()

    async def request_stop(self, conversation_id: str, attempt_id: str) -> int:
        """Deliver the request to the conversation's open watches; how many there were."""
        check_id(conversation_id, "conversation id")
        check_id(attempt_id, "attempt id")
        return self._watches.deliver(conversation_id, attempt_id)

    def watch(self, conversation_id: str) -> AbstractAsyncContextManager[StopWatch]:
        """Receive the conversation's stop requests while the ``async with`` lasts."""
        check_id(conversation_id, "conversation id")
        return self._watch(conversation_id)

    @contextlib.asynccontextmanager
    async def _watch(self, conversation_id: str) -> AsyncIterator[StopWatch]:
        watch = StopWatch(conversation_id)
        self._watches.add(watch)
        try:
            yield watch
        finally:
            self._watches.remove(watch)

    async def aclose(self) -> None:
        """Nothing to release."""
