"""Storage: ``SQLiteStore`` vs the SDK's ``SQLiteSession`` on the same history.

Both write to a database file in a temporary folder. Per turn, ours commits the user and
assistant nodes and moves the branch head by compare-and-set (one transaction); the SDK's
session ``add_items`` the same turn's items. Then ours loads the active path
(``active_path``, one recursive query) and the session ``get_items()``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from agents import SQLiteSession

from agents_state_ext.stores.sqlite import SQLiteStore

from ._common import Row, Section, make_graph

SIZES = (10_000,)
QUICK_SIZES = (500,)


async def _bench(size: int, folder: str, loads: int) -> dict[str, Any]:
    data = make_graph(size)
    path = data.path
    turns: list[list[Any]] = []
    at = 1
    while at < len(path) - 1:
        turns.append(path[at : at + 2])
        at += 2
    if at < len(path):
        turns.append(path[at:])
    store = SQLiteStore(os.path.join(folder, "store.db"))
    session = SQLiteSession("bench", os.path.join(folder, "session.db"))
    try:
        store.create_conversation("conv", strategy="previous_response")
        store.commit("conv", path[:1], expected_head=None, new_head=path[0].id)
        await session.add_items([item for item in path[0].items])
        head = path[0].id
        ours_append: list[float] = []
        theirs_append: list[float] = []
        for nodes in turns:
            items = [item for node in nodes for item in node.items]
            start = time.perf_counter()
            store.commit("conv", nodes, expected_head=head, new_head=nodes[-1].id)
            ours_append.append(time.perf_counter() - start)
            head = nodes[-1].id
            start = time.perf_counter()
            await session.add_items(items)
            theirs_append.append(time.perf_counter() - start)
        ours_load: list[float] = []
        theirs_load: list[float] = []
        loaded: list[Any] = []
        got: list[Any] = []
        for _ in range(loads):
            start = time.perf_counter()
            loaded = store.active_path("conv")
            ours_load.append(time.perf_counter() - start)
            start = time.perf_counter()
            got = await session.get_items()
            theirs_load.append(time.perf_counter() - start)
        same = [n.id for n in loaded] == [n.id for n in path] and len(got) == sum(
            len(n.items) for n in path
        )
        return {
            "nodes": len(path),
            "items": len(got),
            "ours_append_s": statistics.median(ours_append),
            "sdk_append_s": statistics.median(theirs_append),
            "ours_load_s": statistics.median(ours_load),
            "sdk_load_s": statistics.median(theirs_load),
            "same_history": same,
        }
    finally:
        store.close()
        session.close()


def run(*, quick: bool = False, sizes: Sequence[int] | None = None) -> Section:
    section = Section("Store: SQLite, file database", "ours (SQLiteStore)", "SDK SQLiteSession")
    details: dict[str, Any] = {}
    for size in sizes or (QUICK_SIZES if quick else SIZES):
        with tempfile.TemporaryDirectory() as folder:
            r = asyncio.run(_bench(size, folder, 3 if quick else 15))
        details[str(size)] = r
        label = f"{r['nodes']:,} nodes / {r['items']:,} items"
        section.rows += [
            Row(f"append one turn (median), {label}", r["ours_append_s"], r["sdk_append_s"], "s"),
            Row(f"load active path / get_items, {label}", r["ours_load_s"], r["sdk_load_s"], "s"),
        ]
        section.checks.append(f"{label}: both returned the whole history: {r['same_history']}")
        if size >= 10_000:
            section.target(
                f"active-path load at {size // 1000}k ≤ 20 ms",
                r["ours_load_s"] <= 0.020,
                f"{r['ours_load_s'] * 1e3:.1f} ms",
            )
            section.target(
                "active-path load no slower than SQLiteSession.get_items",
                r["ours_load_s"] <= r["sdk_load_s"],
                f"{r['ours_load_s'] * 1e3:.1f} ms vs {r['sdk_load_s'] * 1e3:.1f} ms",
            )
    section.notes.append(
        "ours returns Node objects (graph metadata included), the session plain item dicts; "
        "the session's calls run in a worker thread (asyncio.to_thread), as the SDK ships it"
    )
    section.details = details
    return section


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
