"""What every benchmark shares: seeded synthetic conversations, interleaved pairs, tables.

Every comparison is a run of interleaved pairs (ours, anchor, anchor, ours, ...: the side that
goes first alternates), so a burst of load on a shared machine hits both sides of a pair alike.
Both sides report the same statistic, the median with its p10-p90 spread, and a ratio is the
median of the per-pair ratios, taken within one run, never across runs.
"""

from __future__ import annotations

import base64
import gc
import itertools
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents_state_ext import ConversationGraph, Node

__all__ = [
    "BUDGET",
    "SENTENCES",
    "GcTimer",
    "Pairs",
    "Reasoning",
    "Row",
    "Section",
    "Synthetic",
    "fmt_ratio",
    "fmt_seconds",
    "fmt_spread",
    "interleaved_pairs",
    "make_chat",
    "make_graph",
    "median",
    "pair_cells",
    "spread",
    "target_line",
    "text",
    "timed_pairs",
]

BUDGET = 8_000

SENTENCES = (
    "Could you summarise the last quarterly report in three bullet points?",
    "The deployment failed because the migration locked the orders table for too long.",
    "Je voudrais réserver une table pour quatre personnes demain soir, vers vingt heures.",
    "Die Lieferung verzögert sich leider um zwei Wochen wegen fehlender Bauteile.",
    "¿Puedes explicarme la diferencia entre una lista y una tupla en Python?",
    "请帮我把这段文字翻译成英文，并保持原来的语气。",  # noqa: RUF001 - real Chinese punctuation
    "東京の天気予報によると、明日は午後から雨が降るそうです。",
    "Пожалуйста, проверь этот код на ошибки и предложи улучшения.",
    "هل يمكنك مساعدتي في كتابة رسالة اعتذار للعميل؟",
    "कृपया इस लेख का सारांश दो वाक्यों में लिखिए।",
    "다음 주 회의 일정을 정리해서 팀에 공유해 주세요.",
    "def retry(fn, attempts=3):\n    for i in range(attempts):\n        return fn()",
    "Great, thanks! 🎉 That fixed it — the tests are green again ✅",
)

TOOL_EVERY = 4
"""Every fourth assistant answer calls a tool first (function_call + its output)."""
CANCEL_RATE = 0.03
"""About 3% of assistant attempts are stopped mid-stream and keep their partial text."""


def text(rng: random.Random) -> str:
    """One to four multilingual sentences (code and emoji included)."""
    return " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 4)))


@dataclass
class Synthetic:
    """A seeded conversation built through ``ConversationGraph``'s own API."""

    graph: ConversationGraph
    path: list[Node]
    messages: int

    @property
    def history_nodes(self) -> list[Node]:
        """The active path without the system message and the active prompt."""
        return self.path[1:-1]


@dataclass(frozen=True)
class Reasoning:
    """How :func:`make_graph` gives a reasoning model's answers their reasoning items.

    A reasoning item (``rs_…``, one summary part of 1-4 sentences) comes before every function
    call and every final message of an answer, as the Responses API returns them. With
    ``encrypted`` it carries ``encrypted_content`` (``encrypted_bytes`` random bytes, base64:
    real ones are opaque blobs of a few KiB), so history the library sends itself keeps it
    inline; without, it can only be referenced by id, and such history drops it.
    """

    encrypted: bool = True
    encrypted_bytes: int = 1_600

    def item(self, item_id: str, rng: random.Random) -> dict[str, Any]:
        """One reasoning item with a seeded summary (and encrypted content when asked)."""
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": item_id,
            "summary": [{"type": "summary_text", "text": text(rng)}],
        }
        if self.encrypted:
            blob = rng.getrandbits(8 * self.encrypted_bytes).to_bytes(self.encrypted_bytes, "big")
            item["encrypted_content"] = base64.b64encode(blob).decode()
        return item


def make_graph(messages: int, seed: int = 7, *, reasoning: Reasoning | None = None) -> Synthetic:
    """A graph whose active path has about ``messages`` nodes and ends with an active prompt.

    User and assistant messages alternate; every ``TOOL_EVERY``-th answer holds a
    ``function_call`` and its ``function_call_output`` before its final message, and about
    ``CANCEL_RATE`` of the answers were stopped with partial text. With ``reasoning``, every
    function call and final message has a reasoning item before it (drawn from a separate
    seeded stream, so the texts, turns and stops are those of the same graph without).
    """
    rng = random.Random(seed)
    thinking = random.Random(seed + 1)
    counter = itertools.count(1)
    graph = ConversationGraph(
        "conv_bench", id_factory=lambda prefix: f"{prefix}_{next(counter)}", clock=lambda: 0.0
    )

    def thought(turn: int, step: int) -> list[dict[str, Any]]:
        if reasoning is None:
            return []
        return [reasoning.item(f"rs_{turn}_{step}", thinking)]

    graph.add_system("You are a helpful assistant.")
    turn = 0
    while len(graph) < messages - 1:
        turn += 1
        graph.add_user(text(rng))
        attempt = graph.start_attempt()
        if rng.random() < CANCEL_RATE:
            graph.stream(attempt.id, text(rng)[:40])
            graph.stop(attempt.id)
            continue
        items: list[dict[str, Any]] = []
        if turn % TOOL_EVERY == 0:
            call_id = f"call_{turn}"
            items += thought(turn, 0)
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": "search_orders",
                "arguments": f'{{"query": "order {turn}", "limit": 5}}',
            }
            if reasoning is not None:
                call["id"] = f"fc_{turn}"
            output = {"type": "function_call_output", "call_id": call_id, "output": text(rng)}
            items += [call, output]
        items += thought(turn, 1)
        message: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text(rng)}],
        }
        if reasoning is not None:
            message = {"id": f"msg_{turn}", **message}
        items.append(message)
        graph.complete(attempt.id, items=items)
    graph.add_user(text(rng))
    graph.take_changes()
    path = graph.active_path()
    return Synthetic(graph=graph, path=path, messages=len(path))


def make_chat(messages: int, seed: int = 11) -> list[Node]:
    """The active path of a plain chat: ``messages`` nodes, user prompt then answer, in turn.

    Built through ``ConversationGraph``'s own API, as the chat layer stores them: a user node
    holds one user ``message`` item of 1-4 sentences; an answer holds one assistant message
    of 2-8 sentences shaped as the SDK's ``to_input_item()`` gives it (``id``, ``status``,
    ``output_text`` with ``annotations``), and carries an attempt id, a request id and the
    response id and usage the chat layer records. Ids are uuid-like and seeded.
    """
    rng = random.Random(seed)
    clock = itertools.count()

    def new_id(prefix: str) -> str:
        return f"{prefix}_{rng.getrandbits(128):032x}"

    graph = ConversationGraph(
        "conv_bench", id_factory=new_id, clock=lambda: 1.76e9 + 1.5 * next(clock)
    )
    while len(graph) < messages:
        graph.add_user(text(rng))
        if len(graph) == messages:
            break
        attempt = graph.start_attempt()
        answer = " ".join(text(rng) for _ in range(2))
        item = {
            "id": new_id("msg"),
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        }
        used = {"requests": 1, "input_tokens": rng.randint(200, 8_000)}
        used["output_tokens"] = rng.randint(20, 400)
        used["total_tokens"] = used["input_tokens"] + used["output_tokens"]
        meta = {"response_id": new_id("resp"), "usage": used}
        graph.complete(attempt.id, items=[item], meta=meta)
    return graph.active_path()


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def spread(samples: Sequence[float]) -> tuple[float, float, float]:
    """(p10, median, p90) of ``samples``: the statistic every row of the bench reports."""
    values = sorted(samples)
    if not values:
        return (float("nan"),) * 3
    if len(values) < 3:
        return values[0], median(values), values[-1]
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return deciles[0], median(values), deciles[-1]


@dataclass
class Pairs:
    """Seconds per call of two sides measured in interleaved pairs, and their per-pair ratios."""

    ours: list[float]
    anchor: list[float]

    @property
    def ratios(self) -> list[float]:
        """ours / anchor of each pair: below 1 means ours was faster in that pair."""
        return [o / a for o, a in zip(self.ours, self.anchor, strict=True)]

    @property
    def speedups(self) -> list[float]:
        """anchor / ours of each pair: above 1 means ours was faster in that pair."""
        return [a / o for o, a in zip(self.ours, self.anchor, strict=True)]

    def summary(self) -> dict[str, Any]:
        """Both sides' medians and p10-p90, and the per-pair ratio's median, IQR, p10-p90, range."""
        ratios = sorted(self.ratios)
        q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        r10, r50, r90 = spread(ratios)
        o10, o50, o90 = spread(self.ours)
        a10, a50, a90 = spread(self.anchor)
        return {
            "pairs": len(ratios),
            "ours_median_s": o50,
            "anchor_median_s": a50,
            "ours_p10_p90_s": [o10, o90],
            "anchor_p10_p90_s": [a10, a90],
            "ours_over_anchor": r50,
            "ratio_iqr": [q1, q3],
            "ratio_p10_p90": [r10, r90],
            "ratio_min_max": [ratios[0], ratios[-1]],
        }


def timed_pairs(
    ours: Callable[[], object],
    anchor: Callable[[], object],
    pairs: int,
    *,
    warmup: int = 1,
    inner_ours: int = 1,
    inner_anchor: int = 1,
) -> Pairs:
    """Time ``pairs`` pairs of calls, alternating which side goes first in each pair.

    A sample is the mean of ``inner_*`` back-to-back calls (for work of a few microseconds).
    The collector runs between pairs, never inside one, on both sides alike (its young and
    middle generations each time; a full collection when one is due).
    """
    for _ in range(warmup):
        ours()
        anchor()
    result = Pairs([], [])
    clock = time.perf_counter
    gc_was_enabled = gc.isenabled()
    try:
        for n in range(pairs):
            gc.collect(1)
            gc.disable()
            order = ((ours, inner_ours, result.ours), (anchor, inner_anchor, result.anchor))
            for run, inner, samples in order if n % 2 == 0 else order[::-1]:
                start = clock()
                for _ in range(inner):
                    run()
                samples.append((clock() - start) / inner)
            if gc_was_enabled:
                gc.enable()
    finally:
        if gc_was_enabled:
            gc.enable()
    return result


async def interleaved_pairs(
    ours: Callable[[], Awaitable[object]],
    anchor: Callable[[], Awaitable[object]],
    pairs: int,
    *,
    warmup: int = 2,
    before: Callable[[], object] | None = None,
) -> Pairs:
    """Time ``pairs`` pairs of awaited calls, alternating which side goes first in each pair.

    The garbage collector is left as the caller set it (a user's process runs with it on), so
    a collection lands in whichever call allocates when it is due; alternating the order
    shares that, and any other burst of load, between the sides. ``before`` runs untimed
    before every call (fresh fixtures, for instance).
    """
    for _ in range(warmup):
        for run in (ours, anchor):
            if before is not None:
                before()
            await run()
    result = Pairs([], [])
    clock = time.perf_counter
    for n in range(pairs):
        order = ((ours, result.ours), (anchor, result.anchor))
        for run, samples in order if n % 2 == 0 else order[::-1]:
            if before is not None:
                before()
            start = clock()
            await run()
            samples.append(clock() - start)
    return result


class GcTimer:
    """Time spent in the garbage collector, and collections per generation, while entered.

    Read through ``gc.callbacks``, so it sees every collection of the process, on any thread.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


@dataclass
class Row:
    """One line of a result table: a case, its measurements and how it compares."""

    case: str
    ours: float | None
    theirs: float | None
    unit: str
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """theirs / ours: above 1 means ours is faster."""
        if self.ours is None or self.theirs is None or self.ours == 0:
            return None
        return self.theirs / self.ours

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "ours": self.ours,
            "theirs": self.theirs,
            "unit": self.unit,
            "theirs_over_ours": self.ratio,
            "note": self.note,
            **self.extra,
        }


@dataclass
class Section:
    """One benchmark pair's rows, the name of each side, and checks that must hold."""

    title: str
    ours_label: str
    theirs_label: str
    rows: list[Row] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Notes the page prints under the table (the rest are printed and kept in the JSON).
    page_notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def target(
        self,
        name: str,
        met: bool | None,
        measured: str,
        *,
        ours: str = "—",
        anchor: str = "—",
        ratio: str = "—",
    ) -> None:
        """Record a target's verdict (``None``: not measured) and the cells of its table row."""
        self.targets.append(
            {
                "target": name,
                "met": met,
                "measured": measured,
                "ours": ours,
                "anchor": anchor,
                "ratio": ratio,
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "ours": self.ours_label,
            "theirs": self.theirs_label,
            "rows": [row.to_json() for row in self.rows],
            "checks": self.checks,
            "targets": self.targets,
            "notes": self.notes,
            "page_notes": self.page_notes,
            "details": self.details,
        }

    def render(self) -> str:
        head = ("case", self.ours_label, self.theirs_label, f"{self.theirs_label} / ours", "note")
        body = [
            (row.case, _fmt(row.ours, row.unit), _fmt(row.theirs, row.unit), _ratio(row), row.note)
            for row in self.rows
        ]
        widths = [max(len(str(r[i])) for r in (head, *body)) for i in range(len(head))]
        lines = [f"## {self.title}", ""]
        lines.append(
            "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"
        )
        lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in body:
            cells = [str(c).ljust(w) for c, w in zip(r, widths, strict=True)]
            lines.append("| " + " | ".join(cells) + " |")
        for check in self.checks:
            lines.append(f"- check: {check}")
        for note in (*self.notes, *self.page_notes):
            lines.append(f"- {note}")
        lines += [target_line(t) for t in self.targets]
        return "\n".join(lines)


def target_line(target: Mapping[str, Any]) -> str:
    """One target as a line under a section's table."""
    verdict = {True: "MET   ", False: "MISSED", None: "NOT MEASURED"}[target["met"]]
    return f"- target {verdict} {target['target']}: {target['measured']}"


def fmt_spread(
    values: Sequence[float], fmt: Callable[[float], str], *, label: str = "p10-p90"
) -> str:
    """``median [p10-p90 low-high]`` of ``values``, each formatted with ``fmt``."""
    low, mid, high = spread(values)
    return f"{fmt(mid)} [{label} {fmt(low)}-{fmt(high)}]"


def fmt_ratio(value: float) -> str:
    """A ratio: two decimals below 100, thousands separators above."""
    return f"{value:.2f}x" if value < 100 else f"{value:,.0f}x"


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "s":
        return fmt_seconds(value)
    if unit == "bytes":
        return f"{value / 1024:,.0f} KiB"
    if unit == "Ir":
        return f"{value / 1e6:,.1f} M Ir"
    return f"{value:,.4g} {unit}".strip()


def fmt_seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.1f} µs"


def _ratio(row: Row) -> str:
    ratio = row.ratio
    return "—" if ratio is None else fmt_ratio(ratio)


def pair_cells(pairs: Pairs, *, speedup: bool = False) -> dict[str, str]:
    """The table cells of a timed pair: each side's median [p10-p90], and the per-pair ratio.

    The ratio is ours / anchor, or anchor / ours with ``speedup`` ("how many times faster").
    """
    ratios = pairs.speedups if speedup else pairs.ratios
    return {
        "ours": fmt_spread(pairs.ours, fmt_seconds),
        "anchor": fmt_spread(pairs.anchor, fmt_seconds),
        "ratio": fmt_spread(ratios, fmt_ratio) + (" faster" if speedup else ""),
    }
