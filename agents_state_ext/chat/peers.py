"""The chat handles of this process, so that opening a chat first stores what others left.

A handle whose commit failed keeps the attempts it ended in memory (and tries them again in
the background, see :mod:`.writes`); until then the store holds them ``queued``, as if they
still ran. A user who gives up on that handle and opens the chat again (another tab, a new
request) would find the attempt in flight and could not send after it. So
:func:`store_left` — called by ``open_conversation`` before it reads the graph — stores the
ended attempts every other live handle of the same chat and store in this process still
holds: the next touch of the conversation closes what a failed commit left.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Protocol

from ..errors import StoreError, StoreUnavailableError
from ..stores import ConversationStore

__all__ = ["Book", "register", "store_left"]


class Book(Protocol):
    """What this module needs of a handle's :class:`~.writes.Writes`."""

    def writes_to(
        self, store: object, conversation_id: str, loop: asyncio.AbstractEventLoop
    ) -> bool: ...

    async def store_ended(self) -> None: ...


_BOOKS: weakref.WeakSet[Book] = weakref.WeakSet()


def register(book: Book) -> None:
    """Note ``book`` as a live handle's (dropped with the handle)."""
    _BOOKS.add(book)


async def store_left(store: ConversationStore, conversation_id: str) -> None:
    """Store the ended attempts other handles of ``conversation_id`` on ``store`` hold.

    ``StoreUnavailableError`` is raised (the chat cannot be read either). Any other store
    error is that handle's to report: a lost race (it re-read the store, its ended attempts
    stored over their stored versions), a fenced-out handle, a write the store refused.
    """
    loop = asyncio.get_running_loop()
    for book in list(_BOOKS):
        if book.writes_to(store, conversation_id, loop):
            try:
                await book.store_ended()
            except StoreUnavailableError:
                raise
            except StoreError:
                continue
