"""``WriteGuard``: what a chat asks before it writes to its store or sends a request.

A chat driven by one of several workers (``agents-state-ext serve``) must stop writing the
moment another worker has taken the conversation over. Set ``chat.guard`` to an object with
these two methods (the server's lease, :class:`~agents_state_ext.server.HeldLease`, is one):

- ``fenced()``: an async context manager around each store commit that yields the
  :class:`~agents_state_ext.stores.Fence` the commit is conditioned on (the store refuses it
  with :class:`~agents_state_ext.errors.FencedOutError` once the lease has moved on), or raises
  :class:`~agents_state_ext.errors.FencedOutError` at once when the guard knows it is lost;
- ``before_request()``: awaited before each model request of a server strategy goes out (and
  after each answer); raising withdraws the request, which is then never sent.

A fenced-out commit writes nothing and the chat stops: the attempt's ``error`` is the
``FencedOutError``, and what the next holder wrote stays as it wrote it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from ..stores.base import Fence

__all__ = ["WriteGuard", "fence_args"]


@runtime_checkable
class WriteGuard(Protocol):
    """Fences a chat's commits and vets its requests (see the module)."""

    def fenced(self) -> AbstractAsyncContextManager[Fence]:
        """Hold the fence still for one commit and yield it; ``FencedOutError`` if lost."""
        ...

    async def before_request(self) -> None:
        """Raise to keep the next model request from going out (the lease is lost)."""
        ...


@contextlib.asynccontextmanager
async def fence_args(guard: WriteGuard | None) -> AsyncIterator[dict[str, Fence]]:
    """The keyword arguments of one fenced ``store.commit``: ``{"fence": ...}``, or none."""
    if guard is None:
        yield {}
        return
    async with guard.fenced() as fence:
        yield {"fence": fence}
