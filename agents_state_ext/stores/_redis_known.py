"""How a RedisStore tells a conversation Redis lost from one that never existed.

The store remembers the ids of the conversations it saw exist (created, read or written through
this store object; the last ``KNOWN_IDS`` of them). A remembered conversation found missing
while the namespace's epoch mark is gone or changed (:meth:`~._redis_link.RedisLink.lost`) is
``StoreDataLostError``, never an unknown (and so creatable) id. A worker started after the loss
cannot tell a lost id from one never created.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable
from typing import TypeVar

from ..errors import ConversationNotFoundError, StoreDataLostError
from ._redis_link import RedisLink

__all__ = ["KNOWN_IDS", "KnownConversations"]

KNOWN_IDS = 100_000
"""How many conversation ids a store remembers having seen."""

_T = TypeVar("_T")


class KnownConversations:
    """The conversations a store saw exist, and the check that turns their absence into loss."""

    def __init__(self, link: RedisLink, limit: int = KNOWN_IDS) -> None:
        self._link, self._limit = link, limit
        self._ids: OrderedDict[str, None] = OrderedDict()

    def remember(self, conversation_id: str) -> None:
        self._ids[conversation_id] = None
        self._ids.move_to_end(conversation_id)
        if len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def forget(self, conversation_id: str) -> None:
        self._ids.pop(conversation_id, None)

    async def watch(self, conversation_id: str, work: Awaitable[_T]) -> _T:
        """``work`` on ``conversation_id``: its id remembered, and its loss told from absence."""
        try:
            result = await work
        except ConversationNotFoundError as exc:
            if conversation_id in self._ids and await self._link.lost():
                raise StoreDataLostError(
                    f"conversation {conversation_id!r} is gone from Redis, and so is the mark "
                    "the store left there: Redis lost its data (a restart without persistence?)"
                ) from exc
            raise
        self.remember(conversation_id)
        return result
