"""A watch on one conversation's stop requests, and the open watches of a bus (both buses)."""

from __future__ import annotations

import asyncio

__all__ = ["StopWatch", "Watches", "check_id"]


def check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"a {what} is non-empty text, got {value!r}")
    return value


class StopWatch:
    """The stop requests for one conversation that arrive while a watch is open.

    Open one with :meth:`StopBus.watch`; deliveries stop when its ``async with`` ends.
    """

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self._received: list[str] = []
        self._arrived = asyncio.Event()

    @property
    def received(self) -> list[str]:
        """The attempt ids of every stop request delivered so far, in arrival order."""
        return list(self._received)

    async def requested(self, attempt_id: str | None = None) -> str:
        """The attempt id of the first stop request delivered to this watch.

        With ``attempt_id``: the first request for that attempt (stops for an earlier attempt
        of the conversation are passed over). Returns at once if one already arrived.
        """
        while True:
            arrived = self._arrived
            for stop in self._received:
                if attempt_id is None or stop == attempt_id:
                    return stop
            await arrived.wait()

    def deliver(self, attempt_id: str) -> None:
        """Hand the watch a stop request for ``attempt_id`` (the bus does, on arrival)."""
        self._received.append(attempt_id)
        arrived, self._arrived = self._arrived, asyncio.Event()
        arrived.set()

    def __repr__(self) -> str:
        return f"StopWatch({self.conversation_id!r}, received={self._received!r})"


class Watches:
    """Open watches by conversation id, shared by both buses."""

    def __init__(self) -> None:
        self._by_conversation: dict[str, set[StopWatch]] = {}

    def add(self, watch: StopWatch) -> bool:
        """Register ``watch``; true if it is the first of its conversation."""
        watches = self._by_conversation.setdefault(watch.conversation_id, set())
        watches.add(watch)
        return len(watches) == 1

    def remove(self, watch: StopWatch) -> bool:
        """Unregister ``watch``; true if it was the last of its conversation."""
        watches = self._by_conversation.get(watch.conversation_id)
        if watches is None or watch not in watches:
            return False
        watches.discard(watch)
        if watches:
            return False
        del self._by_conversation[watch.conversation_id]
        return True

    def deliver(self, conversation_id: str, attempt_id: str) -> int:
        watches = list(self._by_conversation.get(conversation_id, ()))
        for watch in watches:
            watch.deliver(attempt_id)
        return len(watches)

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._by_conversation
