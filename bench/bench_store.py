"""Stores: ours against the SDK's sessions on the same seeded chat, in interleaved pairs.

Three parts, one section (``python -m bench --only store``):

- SQLite (this module): ``SQLiteStore`` vs ``agents.SQLiteSession``, each on its own database
  file in one temporary folder, both awaited in one event loop. The session is created with
  its documented constructor and driven only through its public coroutines, which run their
  sqlite3 work through ``asyncio.to_thread`` (``add_items`` also wraps it in the SDK's
  ``_await_mutation`` task); ours runs its work on the store's own thread. Rows: the whole
  active path (``active_path``) vs ``get_items()``, the last 50 vs ``get_items(limit=50)``,
  one appended turn (a user and an assistant node in one ``commit``) vs
  ``add_items([user, assistant])``; the cheapest store call (``get_head``: its thread hop and
  one indexed read) against a bare ``asyncio.to_thread``; the load at a larger size, per 1,000
  messages (linearity), with the garbage collector on (``GC_MODES`` adds frozen and off).
- PostgreSQL (:mod:`bench.bench_store_postgres`): ``PostgresStore`` vs ``SQLAlchemySession``.
- Reopen + select (:mod:`bench.bench_store_reopen`): stored token counts vs a raw tiktoken pass.

The chat is :func:`bench._common.make_chat`: user prompts and answers in turn, one item each,
so N messages are N nodes on our side and the same N items on the SDK's. Seed data is dropped
before timing, so neither side pays for the benchmark's own objects in a collection.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from agents import SQLiteSession

from agents_state_ext import Node, SQLiteStore

from . import bench_store_postgres, bench_store_reopen
from ._common import GcTimer, interleaved_pairs, make_chat
from .bench_store_report import (
    CID,
    StoreSection,
    check_same,
    items_of,
    on_default_executor,
    thread_profile,
)

SIZE = 10_000
BIG = 100_000
PAIRS = 30
BIG_PAIRS = 7
"""A 100k load takes seconds a side: fewer pairs keep the whole benchmark within minutes."""
GC_MODES = ("on",)
"""The 100k load's collector settings; add "freeze" and "off" to see the collector's share."""
QUICK = {"size": 400, "big": 2_000, "pairs": 5}
HOP_PAIRS_PER_PAIR = 10
"""The thread hops take microseconds: ten times the pairs of the other rows."""
LINEAR_TOLERANCE = 1.25
"""The load is called linear when its time per 1,000 messages grows by at most this factor."""
SEED_BATCH = 1_000
PART = "SQLite"
ANCHOR = "SQLiteSession"


def run(
    *,
    quick: bool = False,
    size: int | None = None,
    big: int | None = None,
    pairs: int | None = None,
    postgres_url: str | None = None,
) -> StoreSection:
    """Every part of the store benchmark; PostgreSQL only with a URL (or the environment's)."""
    size = size or (QUICK["size"] if quick else SIZE)
    size += size % 2  # whole turns: the reopen part adds the next prompt
    big = big or (QUICK["big"] if quick else BIG)
    pairs = pairs or (QUICK["pairs"] if quick else PAIRS)
    section = StoreSection(
        "Stores: ours vs the SDK's sessions, same chat, interleaved pairs", "ours", "anchor"
    )
    section.details.update(size=size, big=big, pairs=pairs, profiles={})
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_sqlite(section, folder, size, big, pairs))
        asyncio.run(bench_store_reopen.measure(section, folder, size, pairs))
    url = postgres_url or os.environ.get("STATE_EXT_POSTGRES_URL")
    if url:
        asyncio.run(bench_store_postgres.measure(section, url, size, pairs))
    else:
        reason = "PostgreSQL part skipped: STATE_EXT_POSTGRES_URL is not set"
        print(reason)
        section.notes.append(reason)
    return section


async def seed(store: SQLiteStore, session: SQLiteSession, chat: list[Node]) -> None:
    """The same messages into both, in batches (the layout is the same as turn by turn)."""
    await store.create_conversation(CID, strategy="previous_response")
    head = None
    for at in range(0, len(chat), SEED_BATCH):
        batch = chat[at : at + SEED_BATCH]
        await store.commit(CID, batch, expected_head=head, new_head=batch[-1].id)
        head = batch[-1].id
        await session.add_items(items_of(batch))


def _noop() -> None:
    return None


@contextmanager
def counting_to_thread() -> Iterator[list[str]]:
    """Count ``asyncio.to_thread`` calls (the SDK session looks it up on every call)."""
    calls: list[str] = []
    original = asyncio.to_thread

    async def counted(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(func, "__name__", repr(func)))
        return await original(func, *args, **kwargs)

    asyncio.to_thread = counted
    try:
        yield calls
    finally:
        asyncio.to_thread = original


async def _sqlite(section: StoreSection, folder: str, size: int, big: int, pairs: int) -> None:
    # The loop's default executor made as asyncio makes it when first needed, held here so the
    # profiles can swap it out and back; every timed call runs on it unchanged.
    default = ThreadPoolExecutor(thread_name_prefix="asyncio")
    asyncio.get_running_loop().set_default_executor(default)
    extra_turns = pairs + 2 + PROFILE_CALLS + 2  # pairs, warm-ups, a profile, a check
    chat = make_chat(size + 2 * extra_turns)
    turns = [chat[at : at + 2] for at in range(size, len(chat), 2)]
    store = SQLiteStore(os.path.join(folder, "ours.db"))
    session = SQLiteSession("bench", os.path.join(folder, "sdk.db"))
    try:
        await seed(store, session, chat[:size])
        del chat
        gc.collect()
        await check_same(section, f"{PART}, {size:,} messages", store, session, size)
        await _sqlite_rows(section, store, session, turns, size, pairs, default)
    finally:
        await store.aclose()
        session.close()
    await _sqlite_big(section, folder, size, big, pairs)


PROFILE_CALLS = 5


async def _sqlite_rows(
    section: StoreSection,
    store: SQLiteStore,
    session: SQLiteSession,
    turns: list[list[Node]],
    size: int,
    pairs: int,
    default: ThreadPoolExecutor,
) -> None:
    label = f"{size // 1000}k" if size >= 1000 else str(size)
    # Profiles are taken after every timing of this loop, of the SDK's side only: our store's
    # worker thread is not reachable through the public API (no profiler can be started there).
    later: list[tuple[str, Callable[[], Awaitable[object]]]] = []
    rows: list[tuple[str, Callable[[], Awaitable[object]], Callable[[], Awaitable[object]], float]]
    rows = [
        (
            f"load {label}-message active path vs get_items()",
            lambda: store.active_path(CID),
            session.get_items,
            0.5,
        ),
        (
            "last 50: active_path(limit=50) vs get_items(limit=50)",
            lambda: store.active_path(CID, limit=50),
            lambda: session.get_items(limit=50),
            1.0,
        ),
    ]
    for case, ours, anchor, target in rows:
        summary = section.pair(
            PART, case, ANCHOR, await interleaved_pairs(ours, anchor, pairs), target=target
        )
        if case.startswith("load"):
            section.details["sqlite_load_small"] = summary
            await gc_note(section, f"{PART}, {size:,} messages", ours, anchor)
        if summary["ours_over_anchor"] > target:
            later.append((f"{PART}, {case}", anchor))

    hops = pairs * HOP_PAIRS_PER_PAIR
    section.pair(
        "thread hop",
        "cheapest call: get_head() vs asyncio.to_thread(no-op)",
        "asyncio.to_thread",
        await interleaved_pairs(
            lambda: store.get_head(CID), lambda: asyncio.to_thread(_noop), hops
        ),
        note="get_head: the store's hop plus one indexed read (the public API has no bare hop)",
    )

    supply = iter(turns)
    head = await store.get_head(CID)
    sdk_supply = iter([items_of(turn) for turn in turns])

    async def append_ours() -> None:
        nonlocal head
        user, answer = next(supply)
        await store.commit(CID, [user, answer], expected_head=head, new_head=answer.id)
        head = answer.id

    async def append_sdk() -> None:
        await session.add_items(next(sdk_supply))

    # Each side appends the same turns, in order, onto its copy of the chat.
    summary = section.pair(
        PART,
        "append one turn: commit(user, assistant) vs add_items([user, assistant])",
        ANCHOR,
        await interleaved_pairs(append_ours, append_sdk, pairs),
        target=1.0,
    )
    if summary["ours_over_anchor"] > 1.0:
        later.append((f"{PART}, append one turn", append_sdk))
    with counting_to_thread() as calls:
        await session.get_items()
        await session.get_items(limit=50)
        await append_sdk()
    section.details["sdk_to_thread_calls"] = calls
    section.checks.append(
        f"{ANCHOR} hops by itself: get_items(), get_items(limit=50) and add_items() made these "
        f"asyncio.to_thread calls (counted after the timing): {calls}"
    )
    profiles = section.details["profiles"]
    for name, anchor in later:
        with one_worker_default_executor(default) as enter:
            profiles[f"{name}: {ANCHOR} (to_thread worker)"] = await thread_profile(
                enter, anchor, PROFILE_CALLS
            )


@contextmanager
def one_worker_default_executor(
    default: ThreadPoolExecutor,
) -> Iterator[Callable[[Callable[[], None]], Awaitable[None]]]:
    """Swap the loop's default executor (``default``) for a one-thread one, then back.

    ``asyncio.to_thread`` then runs everything on one known worker, which a profiler can be
    switched on in; the session's code is unchanged (it still calls ``asyncio.to_thread``).
    Yields the function that runs a callable on that worker.
    """
    loop = asyncio.get_running_loop()
    single = ThreadPoolExecutor(1, thread_name_prefix="asyncio")
    loop.set_default_executor(single)
    try:
        yield on_default_executor
    finally:
        loop.set_default_executor(default)
        single.shutdown(wait=True)


GC_CALLS = 5


async def gc_cost(run: Callable[[], Awaitable[object]], calls: int = GC_CALLS) -> dict[str, Any]:
    """Per call of ``run``: seconds, seconds in the collector, collections by generation."""
    with GcTimer() as timer:
        start = time.perf_counter()
        for _ in range(calls):
            await run()
        total = time.perf_counter() - start
    return {
        "calls": calls,
        "s_per_call": total / calls,
        "gc_s_per_call": timer.seconds / calls,
        "collections_per_call": [n / calls for n in timer.collections],
    }


async def gc_note(
    section: StoreSection,
    label: str,
    ours: Callable[[], Awaitable[object]],
    anchor: Callable[[], Awaitable[object]],
) -> None:
    """How much of each side's load is the garbage collector (gc on, after the timed pairs)."""
    costs = {"ours": await gc_cost(ours), ANCHOR: await gc_cost(anchor)}
    section.details.setdefault("gc_cost", {})[label] = costs
    section.notes.append(
        f"{label}, load with gc on, {GC_CALLS} calls a side after the pairs: "
        + "; ".join(
            f"{side} {c['gc_s_per_call'] * 1e3:.1f} ms in the collector of "
            f"{c['s_per_call'] * 1e3:.1f} ms a call "
            f"(collections a call by generation: "
            f"{'/'.join(f'{n:g}' for n in c['collections_per_call'])})"
            for side, c in costs.items()
        )
    )


@contextmanager
def gc_mode(mode: str) -> Iterator[None]:
    """``on``: as a user runs Python; ``freeze``: ``gc.freeze()`` first; ``off``: disabled."""
    was_enabled = gc.isenabled()
    gc.collect()
    if mode == "freeze":
        gc.freeze()
    elif mode == "off":
        gc.disable()
    try:
        yield
    finally:
        if mode == "freeze":
            gc.unfreeze()
        if was_enabled:
            gc.enable()


async def _sqlite_big(section: StoreSection, folder: str, size: int, big: int, pairs: int) -> None:
    chat = make_chat(big)
    store = SQLiteStore(os.path.join(folder, "ours_big.db"))
    session = SQLiteSession("bench", os.path.join(folder, "sdk_big.db"))
    started = time.perf_counter()
    try:
        await seed(store, session, chat)
        del chat
        section.details["big_seed_s"] = time.perf_counter() - started
        await check_same(section, f"{PART}, {big:,} messages", store, session, big)
        label = f"{big // 1000}k" if big >= 1000 else str(big)
        small = section.details["sqlite_load_small"]
        by_mode: dict[str, dict[str, Any]] = {}
        big_pairs = min(pairs, BIG_PAIRS)
        for mode in GC_MODES:
            with gc_mode(mode):
                by_mode[mode] = section.pair(
                    PART,
                    f"load {label}-message active path vs get_items(), gc {mode}",
                    ANCHOR,
                    await interleaved_pairs(
                        lambda: store.active_path(CID), session.get_items, big_pairs
                    ),
                )
                if mode != "off":
                    await gc_note(
                        section,
                        f"{PART}, {big:,} messages, gc {mode}",
                        lambda: store.active_path(CID),
                        session.get_items,
                    )
        section.details["gc_modes"] = by_mode
        per_k = {
            side: (small[key] / size * 1000, by_mode["on"][key] / big * 1000)
            for side, key in (("ours", "ours_median_s"), ("anchor", "anchor_median_s"))
        }
        section.details["per_1k_messages_s"] = per_k
        growth = per_k["ours"][1] / per_k["ours"][0]
        section.target(
            f"SQLite: load stays linear from {size:,} to {big:,} messages (gc on): time per "
            f"1k messages grows ≤ {LINEAR_TOLERANCE}x",
            growth <= LINEAR_TOLERANCE,
            f"ours {per_k['ours'][0] * 1e3:.2f} -> {per_k['ours'][1] * 1e3:.2f} ms per 1k "
            f"({growth:.2f}x); {ANCHOR} {per_k['anchor'][0] * 1e3:.2f} -> "
            f"{per_k['anchor'][1] * 1e3:.2f} ms per 1k "
            f"({per_k['anchor'][1] / per_k['anchor'][0]:.2f}x)",
            ours=f"{per_k['ours'][0] * 1e3:.2f} → {per_k['ours'][1] * 1e3:.2f} ms per 1k",
            anchor=f"{ANCHOR} {per_k['anchor'][0] * 1e3:.2f} → "
            f"{per_k['anchor'][1] * 1e3:.2f} ms per 1k",
            ratio=f"{growth:.2f}x (ours, {big:,} / {size:,} messages, per message)",
        )
    finally:
        await store.aclose()
        session.close()


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
