"""Trace one streamed ``chat.send``: which package modules call which (``-m tools.trace_send``).

Opens a replay chat on the in-memory store, answered by the testing kit's ``MockResponsesAPI``,
and runs one streamed send under ``sys.setprofile``. Prints the package modules touched, the
number of calls from one package function to another, and the module pairs that call each
other both ways (the measure of issue 30: a turn should flow one way through the chat's
modules). ``--strategy`` picks the chat's strategy (default ``replay``); ``--calls`` also
prints every module-to-module edge with its count.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from agents import Agent, set_tracing_disabled

import agents_state_ext
from agents_state_ext import InMemoryStore, open_conversation
from agents_state_ext.testing import MockResponsesAPI, Reply

_ROOT = str(Path(agents_state_ext.__file__).resolve().parent)


def _module(frame: FrameType | None, testing: bool) -> str | None:
    """The package module ``frame`` runs in (``chat.turn``, ``_graph``, ...), else ``None``."""
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    if not filename.startswith(_ROOT):
        return None
    relative = filename[len(_ROOT) + 1 :].removesuffix(".py").replace("/", ".")
    name = relative.removesuffix(".__init__") or "__init__"
    return None if name.startswith("testing") and not testing else name


async def _trace(
    strategy: str, testing: bool
) -> tuple[collections.Counter[tuple[str, str]], set[str]]:
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    touched: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame, testing)
        if callee is None:
            return
        touched.add(callee)
        caller = _module(frame.f_back, testing)
        if caller is not None and caller != callee:
            edges[(caller, callee)] += 1

    async with MockResponsesAPI() as mock, InMemoryStore() as store:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
        chat = await open_conversation(store, strategy=strategy, agent=agent)  # type: ignore[arg-type]
        mock.enqueue(Reply.text("Hello there, how are you?"))
        sys.setprofile(profile)
        try:
            attempt = chat.send("hi", stream=True)
            async for _ in attempt:
                pass
            await attempt
        finally:
            sys.setprofile(None)
    return edges, touched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--strategy", default="replay")
    parser.add_argument("--testing", action="store_true", help="count the testing kit too")
    parser.add_argument("--calls", action="store_true", help="print every edge with its count")
    args = parser.parse_args(argv)
    set_tracing_disabled(True)
    edges, touched = asyncio.run(_trace(args.strategy, args.testing))
    pairs = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    print(f"modules touched: {len(touched)}")
    for name in sorted(touched):
        print(f"  {name}")
    print(f"package calls across modules: {sum(edges.values())}")
    if args.calls:
        for (caller, callee), count in sorted(edges.items()):
            print(f"  {caller} -> {callee}: {count}")
    print(f"module pairs calling each other both ways: {len(pairs)}")
    for a, b in pairs:
        print(f"  {a} <-> {b} ({edges[(a, b)]} / {edges[(b, a)]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
