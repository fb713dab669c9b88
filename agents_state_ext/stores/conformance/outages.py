"""Network checks: what a store over a network does when its connection is cut.

They need an :class:`Outage` beside the factory (something that can cut the stores' line to
their server, such as a TCP proxy in front of it), so they are not in ``CHECKS``: run them with
``check(factory, outage)`` or ``run_conformance(factory, outage=outage)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..._nodes import Node
from ...errors import StoreUnavailableError
from ._support import StoreFactory, expect, opened, raises

__all__ = ["Outage", "OutageCheck", "check_unavailable_when_cut"]

_HEAL_TRIES = 100  # calls a store gets to answer again once its server is back
_HEAL_PAUSE = 0.1  # seconds between them: a pool may be waiting out its reconnect backoff


class Outage(Protocol):
    """Cuts the line between the stores a factory makes and their server, then restores it."""

    async def cut(self) -> None:
        """Close every open connection to the server and refuse new ones until restored."""

    async def restore(self) -> None:
        """Let connections through again."""


OutageCheck = Callable[[StoreFactory, Outage], Awaitable[None]]
"""One network check."""


async def check_unavailable_when_cut(factory: StoreFactory, outage: Outage) -> None:
    """With its connection cut, every call is ``StoreUnavailableError``; restored, it heals.

    Reads and writes alike raise the typed error (never a bare ``StoreError``, never a
    driver's exception, never a hang), and the same store object answers again once the
    server can be reached, with what it held before the cut.
    """
    root = Node("n1", None, "user", "complete", [{"content": "hi"}])
    reply = Node("n2", "n1", "assistant", "complete", [{"content": "hello"}])
    async with opened(factory) as store:
        await store.create_conversation("c1", strategy="replay")
        await store.commit("c1", [root], expected_head=None, new_head="n1")
        await outage.cut()
        try:
            calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                ("get_conversation", lambda: store.get_conversation("c1")),
                ("load_graph", lambda: store.load_graph("c1")),
                ("active_path", lambda: store.active_path("c1")),
                ("list_attempts", lambda: store.list_attempts("c1")),
                ("create_conversation", lambda: store.create_conversation("c2", strategy="x")),
                ("commit", lambda: store.commit("c1", [reply], expected_head="n1", new_head="n2")),
            ]
            for name, call in calls:
                await raises(StoreUnavailableError, f"{name} with the connection cut", call())
        finally:
            await outage.restore()
        head = None
        for _ in range(_HEAL_TRIES):
            try:
                head = await store.get_head("c1")
                break
            except StoreUnavailableError:
                await asyncio.sleep(_HEAL_PAUSE)
        expect(head in ("n1", "n2"), f"the store did not heal after the cut (head {head!r})")
