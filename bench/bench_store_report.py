"""The store benchmark's table: per row a target, both medians, the per-pair ratio and its spread.

Ratios here are ours / anchor (below 1: ours is faster), the way the targets are written
("≤ 0.5x"), and a row's verdict is its median per-pair ratio against the target. Rows without
a target (thread hops, the garbage-collector variants) are reported the same way.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import pstats
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agents_state_ext import Node

from ._common import Pairs, Row, Section, fmt_seconds, pair_cells, target_line

__all__ = [
    "CID",
    "StoreSection",
    "check_same",
    "items_of",
    "main_thread_profile",
    "on_default_executor",
    "profile_text",
    "thread_profile",
]

PROFILE_TOP = 14
CID = "conv_bench"
"""The conversation id (ours) of the seeded chat in the SQLite and PostgreSQL parts."""


@dataclass
class StoreSection(Section):
    """A :class:`Section` whose rows are interleaved pairs against a named anchor."""

    def pair(
        self,
        part: str,
        case: str,
        anchor: str,
        pairs: Pairs,
        *,
        target: float | None = None,
        note: str = "",
    ) -> dict[str, Any]:
        """Add the row of one measured pair (and its target, if any); returns its summary."""
        summary = pairs.summary()
        met = None if target is None else summary["ours_over_anchor"] <= target
        extra = {"part": part, "anchor": anchor, "target_ours_over_anchor": target, "met": met}
        self.rows.append(
            Row(
                case,
                summary["ours_median_s"],
                summary["anchor_median_s"],
                "s",
                note,
                extra={**extra, **summary},
            )
        )
        if target is not None:
            r10, r90 = summary["ratio_p10_p90"]
            self.target(
                f"{part}: {case}: ours ≤ {target:g}x {anchor}",
                bool(met),
                f"{summary['ours_over_anchor']:.2f}x (p10-p90 {r10:.2f}-{r90:.2f}, "
                f"{summary['pairs']} pairs)",
                **pair_cells(pairs),
            )
        return summary

    def render(self) -> str:
        head = ("part", "case", "anchor", "target", "ours", "anchor time", "ours / anchor", "met")
        body = [_cells(row) for row in self.rows]
        widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]

        def line(cells: tuple[str, ...]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        lines = [f"## {self.title}", "", line(head)]
        lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        lines += [line(cells) for cells in body]
        lines += [f"- check: {check}" for check in self.checks]
        lines += [f"- {note}" for note in self.notes]
        lines += [target_line(t) for t in self.targets]
        for name, text in self.details.get("profiles", {}).items():
            lines += ["", f"### profile: {name}", "", "```text", text.rstrip(), "```"]
        return "\n".join(lines)


async def check_same(
    section: StoreSection, label: str, store: Any, session: Any, messages: int
) -> None:
    """Check (untimed) that both sides hold exactly the seeded messages, in the same order."""
    path, items = await store.active_path(CID), await session.get_items()
    same = len(path) == messages and items_of(path) == items
    section.details.setdefault("same_history", {})[label] = same
    section.checks.append(f"{label}: both hold the same {len(items):,} items in order: {same}")


def items_of(nodes: Iterable[Node]) -> list[Any]:
    """The nodes' items in order: what the SDK's sessions are given for the same messages."""
    return [item for node in nodes for item in node.items]


def _cells(row: Row) -> tuple[str, ...]:
    x = row.extra
    target = x.get("target_ours_over_anchor")
    met = x.get("met")
    ratio = "—"
    if "ours_over_anchor" in x:
        r10, r90 = x["ratio_p10_p90"]
        low, high = x["ratio_min_max"]
        ratio = f"{x['ours_over_anchor']:.2f}x [p10-p90 {r10:.2f}-{r90:.2f}; {low:.2f}-{high:.2f}]"
    return (
        str(x.get("part", "")),
        row.case,
        str(x.get("anchor", "")),
        "—" if target is None else f"≤ {target:g}x",
        "—" if row.ours is None else fmt_seconds(row.ours),
        "—" if row.theirs is None else fmt_seconds(row.theirs),
        ratio,
        "—" if met is None else ("met" if met else "MISSED"),
    )


def profile_text(profile: cProfile.Profile, top: int = PROFILE_TOP) -> str:
    """The ``top`` entries of a profile by own time, as pstats prints them."""
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    # pstats opens with a blank line, the totals and an "Ordered by" line; keep from the totals.
    start = text.find("function calls")
    return text[text.rfind("\n", 0, start) + 1 :] if start >= 0 else text


async def thread_profile(
    enter: Callable[[Callable[[], None]], Awaitable[None]],
    run: Callable[[], Awaitable[object]],
    calls: int,
) -> str:
    """Profile ``calls`` awaited calls of ``run`` in the worker thread that ``enter`` runs on.

    cProfile watches only the thread that enables it, so the profiler is switched on and off
    by functions handed to ``enter`` (which must run them on the thread doing the work). One
    call first, unprofiled, warms that thread (a session opens its connection per thread).
    """
    await run()
    profile = cProfile.Profile()
    await enter(profile.enable)
    try:
        for _ in range(calls):
            await run()
    finally:
        await enter(profile.disable)
    return profile_text(profile)


async def main_thread_profile(run: Callable[[], Awaitable[object]], calls: int) -> str:
    """Profile ``calls`` awaited calls of ``run`` on the event loop's thread (one warm-up first)."""
    await run()
    profile = cProfile.Profile()
    profile.enable()
    try:
        for _ in range(calls):
            await run()
    finally:
        profile.disable()
    return profile_text(profile)


def on_default_executor(fn: Callable[[], None]) -> Awaitable[None]:
    """Run ``fn`` on the loop's default executor (where ``asyncio.to_thread`` runs work)."""
    return asyncio.get_running_loop().run_in_executor(None, fn)
