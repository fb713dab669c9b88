"""Reopen + select: a stored conversation's next request built from stored token counts.

A chat of N messages plus the next user prompt is stored in a ``SQLiteStore`` with every
node's ``o200k_base`` count (``put_token_counts``, what the chat layer keeps beside each node).
Ours, timed as one call and as its three components: load the active path
(``active_path``), load the counts (``get_token_counts``), and build the request's context
(``select_context`` with a new ``ContextIndex``, as a process that has just opened the
conversation has, and a counter that answers from the loaded counts). The store is already
open (an app keeps it open); opening it is reported on its own. The anchor: one raw tiktoken
pass, ``encoding.encode`` of every message's text (the same N + 1 messages), with the
encoding already loaded.

Also measured, without a target: the same build counting afresh (a new ``TokenCounter``, no
stored counts), which is what reopening costs when nothing was stored.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from agents_state_ext import (
    ContextIndex,
    ContextSelection,
    SQLiteStore,
    TokenCounter,
    load_encoding,
    select_context,
)

from ._common import BUDGET, interleaved_pairs, make_chat, median
from .bench_store_report import StoreSection, main_thread_profile

ENCODING = "o200k_base"
TARGET = 0.1
CID = "conv_reopen"
PART = "reopen + select"
ANCHOR = "raw tiktoken pass"
PROFILE_CALLS = 5
WARMUP = 2


async def measure(section: StoreSection, folder: str, size: int, pairs: int) -> None:
    """Add the reopen + select rows for a chat of ``size`` messages and the next prompt."""
    chat = make_chat(size + 1)
    encoding = load_encoding(ENCODING)
    exact = TokenCounter(encoding=ENCODING)
    ids = [node.id for node in chat]
    counts = dict(zip(ids, exact.count_many((n.id, n.items) for n in chat), strict=True))
    texts = [node.text() for node in chat]
    path_file = os.path.join(folder, "reopen.db")
    store = SQLiteStore(path_file)
    try:
        await store.create_conversation(CID, strategy="previous_response")
        await store.commit(CID, chat, expected_head=None, new_head=chat[-1].id)
        await store.put_token_counts(CID, ENCODING, counts)
        expected = select_context(chat, budget=BUDGET, counter=TokenCounter(encoding=ENCODING))
        del chat, counts
        await _rows(section, store, encoding, texts, expected, size, pairs)
    finally:
        await store.aclose()
    opens = []
    for _ in range(pairs):
        start = time.perf_counter()
        reopened = SQLiteStore(path_file)
        opens.append(time.perf_counter() - start)
        await reopened.aclose()
    section.details["reopen_store_open_s"] = median(opens)
    section.notes.append(
        f"{PART}: opening the SQLiteStore itself (not in the rows: an app keeps it open) takes "
        f"{median(opens) * 1e3:.2f} ms (median of {pairs})"
    )


async def _rows(
    section: StoreSection,
    store: SQLiteStore,
    encoding: Any,
    texts: list[str],
    expected: ContextSelection,
    size: int,
    pairs: int,
) -> None:
    components: list[tuple[float, float, float]] = []
    misses: list[int] = []
    selections: list[ContextSelection] = []

    async def ours() -> None:
        clock = time.perf_counter
        t0 = clock()
        path = await store.active_path(CID)
        t1 = clock()
        stored = await store.get_token_counts(CID, ENCODING)
        t2 = clock()
        # What a chat reopened from the store does: its counter trusts the stored counts.
        counter = TokenCounter(encoding=ENCODING)
        counter.trust(stored)
        selections.append(
            select_context(path, budget=BUDGET, counter=counter, index=ContextIndex())
        )
        components.append((t1 - t0, t2 - t1, clock() - t2))
        misses.append(counter.cache_info().misses)

    async def raw_pass() -> None:
        encode = encoding.encode
        for text in texts:
            encode(text)

    async def counting_afresh() -> None:
        path = await store.active_path(CID)
        select_context(path, budget=BUDGET, counter=TokenCounter(encoding=ENCODING))

    messages = len(texts)
    label = f"{size // 1000}k" if size >= 1000 else str(size)
    case = f"{label} messages + prompt: path + counts + select_context"
    summary = section.pair(
        PART,
        case,
        ANCHOR,
        await interleaved_pairs(ours, raw_pass, pairs, warmup=WARMUP),
        target=TARGET,
    )
    last = selections[-1]
    same = [n.id for n in last.nodes] == [n.id for n in expected.nodes]
    same = same and last.used == expected.used
    section.details["reopen_same_selection"] = same
    section.details["reopen_missing_counts"] = max(misses)
    section.checks.append(
        f"{PART}: the selection from stored counts equals the one counted afresh "
        f"({last.turns} turns, {last.used:,} of {BUDGET:,} tokens): "
        f"{same}; counts missing from the store: {max(misses)}"
    )
    timed = components[WARMUP:]  # the warm-up calls of interleaved_pairs left out
    parts = {
        name: statistics.median(c[k] for c in timed)
        for k, name in enumerate(("active_path", "get_token_counts", "select_context"))
    }
    section.details["reopen_components_s"] = parts
    section.details["reopen_messages"] = messages
    anchor = summary["anchor_median_s"]
    section.notes.append(
        f"{PART}: components of ours (medians over the timed calls): "
        + ", ".join(
            f"{k} {v * 1e3:.2f} ms ({v / anchor:.2f}x the raw pass)" for k, v in parts.items()
        )
    )
    section.pair(
        PART,
        f"{label} messages + prompt: path + select_context counting afresh",
        ANCHOR,
        await interleaved_pairs(counting_afresh, raw_pass, pairs),
        note="no stored counts: a new TokenCounter encodes what the selection indexes",
    )
    if summary["ours_over_anchor"] > TARGET:
        # The event loop's thread only: the store's worker thread is not reachable through
        # the public API, so what runs there (the path and counts queries) is not profiled.
        section.details["profiles"][
            f"{PART}: ours, event loop thread (select_context)"
        ] = await main_thread_profile(ours, PROFILE_CALLS)
