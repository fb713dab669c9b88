"""Reasoning items in a replay turn: what carrying or dropping them costs selection and counting.

A reasoning model puts a reasoning item before every function call and final message. Under
client-owned history (replay, session) the library sends that history itself, so each request
selects the window (exact ``o200k_base`` counts, budget :data:`bench._common.BUDGET`) and then
makes it self-contained (:func:`agents_state_ext._reasoning.self_contained`): a reasoning item
with its ``encrypted_content`` goes inline, one without is dropped and its items lose their ids.

Both sides of every row build the same history from the same seed (the same texts, turns, tool
calls and stops, :func:`bench._common.make_graph`); one side's answers also hold reasoning
items. Both sides do the same work, select then make self-contained, in interleaved pairs
(:func:`bench._common.timed_pairs`); the ratio is the median of the per-pair ratios.

Rows, per history size:

- one new replay turn, reasoning inline vs without: the pending attempt completes with an
  answer (``[reasoning, message]`` on the reasoning side, ``[message]`` on the other), the user
  sends the next prompt, and the next request's input is built, with each side's warm counter
  and ``ContextIndex``. Each pair adds one turn to both sides.
- the same with reasoning by id only (``store=False`` or expired): every reasoning item is
  dropped on the way out.
- cold counting and selection: a fresh counter and index, so every message the build looks at
  is encoded (a worker that meets the conversation for the first time).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from agents_state_ext import ContextIndex, ConversationGraph, TokenCounter
from agents_state_ext._reasoning import count_reasoning, self_contained

from ._common import (
    BUDGET,
    Pairs,
    Reasoning,
    Row,
    Section,
    fmt_ratio,
    fmt_spread,
    make_graph,
    pair_cells,
    text,
    timed_pairs,
)
from .bench_context import ENCODING, select_ours

SIZES = (10_000,)
QUICK_SIZES = (200,)
PAIRS = {"turn": 30, "cold": 9}
QUICK_PAIRS = {"turn": 5, "cold": 3}
TARGET = 1.5
"""One new replay turn with reasoning inline costs at most this many times the same without."""


class _Side:
    """One history and the warm state a chat keeps for it: counter, index, turn supply."""

    def __init__(self, size: int, reasoning: Reasoning | None, turns: int) -> None:
        self.reasoning = reasoning
        self.graph: ConversationGraph = make_graph(size, reasoning=reasoning).graph
        self.counter = TokenCounter(encoding=ENCODING)
        self.index = ContextIndex()
        rng, thinking = random.Random(size), random.Random(size + 1)
        self.turns: list[tuple[list[dict[str, Any]], str]] = []
        for n in range(turns):
            answer = {
                "id": f"msg_new_{n}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text(rng)}],
            }
            items = [answer]
            if reasoning is not None:
                items.insert(0, reasoning.item(f"rs_new_{n}", thinking))
            self.turns.append((items, text(rng)))
        self.supply = iter(self.turns)

    def request(self, counter: TokenCounter, index: ContextIndex) -> tuple[Any, list[Any]]:
        """The next request's selection and the input it sends."""
        selection = select_ours(self.graph, counter, index)
        sent, _ = self_contained(selection.items)
        return selection, sent

    def new_turn(self) -> list[Any]:
        items, prompt = next(self.supply)
        attempt = self.graph.start_attempt()
        self.graph.complete(attempt.id, items=items)
        self.graph.add_user(prompt)
        return self.request(self.counter, self.index)[1]


def _check(side: _Side) -> dict[str, Any]:
    """What the side's next request selects and sends: turns, tokens, reasoning kept/dropped."""
    selection, sent = side.request(side.counter, side.index)
    _, carried = self_contained(selection.items)
    return {
        "turns": selection.turns,
        "used": selection.used,
        "within_budget": selection.used <= BUDGET and not selection.overflow,
        "sent_tokens": side.counter.count_items(sent),
        "reasoning_selected": count_reasoning(selection.items),
        "reasoning_carried": carried.kept,
        "reasoning_dropped": carried.dropped,
        "reasoning_ids_sent": sum(
            1
            for i in sent
            if isinstance(i, Mapping)
            and i.get("type") == "reasoning"
            and not i.get("encrypted_content")
        ),
        "user_texts_sent": [
            i["content"] for i in sent if isinstance(i, Mapping) and i.get("role") == "user"
        ],
    }


def bench_size(size: int, pairs: Mapping[str, int]) -> dict[str, Any]:
    """Every timed row at one history size, and the checks of what each side sends."""
    turns = 2 * pairs["turn"] + 4
    plain = _Side(size, None, turns)
    inline = _Side(size, Reasoning(encrypted=True), turns)
    by_id = _Side(size, Reasoning(encrypted=False), turns)
    result: dict[str, Any] = {"messages": len(plain.graph.active_path())}
    for side in (plain, inline, by_id):
        side.request(side.counter, side.index)  # warm, as a chat is after its first request

    # Cold: a fresh counter and index per build, made outside the timed call; the same
    # builds on both sides of a pair, before any new turn is added.
    def cold(side: _Side, fresh: list[TokenCounter]) -> Any:
        return side.request(fresh.pop(), ContextIndex())

    fresh_plain = [TokenCounter(encoding=ENCODING) for _ in range(pairs["cold"] + 1)]
    fresh_inline = [TokenCounter(encoding=ENCODING) for _ in range(pairs["cold"] + 1)]
    result["cold"] = timed_pairs(
        lambda: cold(inline, fresh_inline), lambda: cold(plain, fresh_plain), pairs["cold"]
    )

    result["inline_turn"] = timed_pairs(inline.new_turn, plain.new_turn, pairs["turn"])
    plain_again = _Side(size, None, turns)
    plain_again.request(plain_again.counter, plain_again.index)
    result["by_id_turn"] = timed_pairs(by_id.new_turn, plain_again.new_turn, pairs["turn"])
    result["check"] = {
        "without": _check(plain_again),
        "inline": _check(inline),
        "by_id": _check(by_id),
    }
    return result


def _label(size: int) -> str:
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else f"{size:,}"


def run(*, quick: bool = False, sizes: Sequence[int] | None = None) -> Section:
    sizes = tuple(sizes or (QUICK_SIZES if quick else SIZES))
    pairs = QUICK_PAIRS if quick else PAIRS
    section = Section(
        f"Reasoning items in a replay turn, budget {BUDGET:,}, exact {ENCODING} counts",
        "with reasoning",
        "without",
    )
    details: dict[str, Any] = {}
    for size in sizes:
        result = bench_size(size, pairs)
        label = f"{_label(size)} msgs"
        d = details[str(size)] = {k: v for k, v in result.items() if not isinstance(v, Pairs)}
        rows: list[tuple[str, Pairs]] = [
            ("one new replay turn, reasoning inline", result["inline_turn"]),
            ("one new replay turn, reasoning by id (dropped)", result["by_id_turn"]),
            ("cold counting and selection, reasoning inline", result["cold"]),
        ]
        for case, timed in rows:
            summary = timed.summary()
            d[case] = summary
            section.rows.append(
                Row(
                    f"{label}: {case}",
                    summary["ours_median_s"],
                    summary["anchor_median_s"],
                    "s",
                    note=f"{len(timed.ours)} pairs, per pair with / without "
                    f"{fmt_spread(timed.ratios, fmt_ratio)}",
                )
            )
        check = result["check"]
        for name in ("without", "inline", "by_id"):
            c = check[name]
            section.checks.append(
                f"{label} {name}: {c['turns']} turns, used {c['used']:,} tokens "
                f"(within budget: {c['within_budget']}), {c['sent_tokens']:,} tokens sent, "
                f"reasoning selected {c['reasoning_selected']}, carried "
                f"{c['reasoning_carried']}, dropped {c['reasoning_dropped']}, sent by id "
                f"{c['reasoning_ids_sent']}"
            )
        same_prompts = (
            check["without"]["user_texts_sent"][-1] == check["inline"]["user_texts_sent"][-1]
        )
        section.checks.append(f"{label}: both sides end on the same prompt: {same_prompts}")
        for c in check.values():
            del c["user_texts_sent"]
        turn = result["inline_turn"]
        ratio = turn.summary()["ours_over_anchor"]
        cells = pair_cells(turn)
        section.target(
            f"one new replay turn with reasoning inline ≤ {TARGET}x the same turn without "
            f"({label})",
            ratio <= TARGET,
            f"{fmt_ratio(ratio)} per-pair median",
            ours=cells["ours"],
            anchor=cells["anchor"],
            ratio=cells["ratio"],
        )
        if check["by_id"]["sent_tokens"] < check["by_id"]["used"]:
            section.notes.append(
                f"{label} by id: the selection counts the reasoning items it then drops "
                f"({check['by_id']['used']:,} tokens used, {check['by_id']['sent_tokens']:,} "
                "sent): the window is packed below the budget"
            )
    section.details = details
    return section
