"""Context selection: ``select_context`` vs LangChain's ``trim_messages`` on the same history.

Both sides count with the exact tiktoken ``o200k_base`` encoding and the same per-message
framing (3 + role + text; a tool call 3 + name + arguments; a tool output 3 + output), so every
message costs the same on both sides and the selections differ only by policy.

Cases, per history size:

- ours cold: empty count cache, new ``ContextIndex``: every kept message is encoded.
- ours warm: the graph's active path plus a build with the conversation's warm index.
- raw tiktoken: ``encode_ordinary`` over exactly the texts the cold build counts (those of
  the system messages, the active prompt and the complete turns, roles and tool names
  included), one call per text as ours makes: the floor for cold counting.
- trim exact: ``trim_messages(strategy="last", include_system=True, start_on="human")`` with
  an uncached per-message exact counter (trim_messages calls it on prefixes: O(n log n)).
- trim warm cache: the same with a per-message cache keyed by message id, already filled.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents_state_ext.context import ContextIndex, ContextSelection, select_context
from agents_state_ext.nodes import Node
from agents_state_ext.tokens import TokenCounter, item_texts

from ._common import BUDGET, Row, Section, Synthetic, interleaved, loop_time, make_graph

SIZES = (1_000, 10_000, 50_000)
QUICK_SIZES = (200, 1_000)
ENCODING = "o200k_base"


def to_langchain(path: Sequence[Node]) -> list[Any]:
    """The path as LangChain messages, ids ``<node id>#<item index>``, one per item."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    messages: list[Any] = []
    for node in path:
        for k, item in enumerate(node.items):
            mid = f"{node.id}#{k}"
            kind = item.get("type")
            if kind == "function_call":
                call = {"name": item["name"], "args": json.loads(item["arguments"])}
                call["id"] = item["call_id"]
                messages.append(AIMessage(content="", tool_calls=[call], id=mid))
            elif kind == "function_call_output":
                messages.append(
                    ToolMessage(content=item["output"], tool_call_id=item["call_id"], id=mid)
                )
            else:
                content = item["content"]
                if isinstance(content, list):
                    content = "".join(part["text"] for part in content)
                cls = {"system": SystemMessage, "user": HumanMessage}.get(item["role"], AIMessage)
                messages.append(cls(content=content, id=mid))
    return messages


_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def langchain_counter(encoding: Any) -> Callable[[Any], int]:
    """An exact per-message counter with the same framing as ``TokenCounter``."""
    from langchain_core.messages import BaseMessage

    encode = encoding.encode_ordinary

    def count(message: BaseMessage) -> int:
        tool_calls = getattr(message, "tool_calls", None)
        if tool_calls:
            return sum(
                3 + len(encode(c["name"])) + len(encode(json.dumps(c["args"]))) for c in tool_calls
            )
        if message.type == "tool":
            return 3 + len(encode(str(message.content)))
        return 3 + len(encode(_ROLES[message.type])) + len(encode(str(message.content)))

    count.__annotations__["message"] = BaseMessage  # trim_messages checks this to sum per message
    return count


def cached_counter(count: Callable[[Any], int]) -> tuple[Callable[[Any], int], dict[str, int]]:
    """``count`` memoized by message id: the warm per-message cache a LangChain app would add."""
    from langchain_core.messages import BaseMessage

    cache: dict[str, int] = {}

    def cached(message: BaseMessage) -> int:
        key = message.id
        hit = cache.get(key) if key is not None else None
        if hit is None:
            hit = count(message)
            if key is not None:
                cache[key] = hit
        return hit

    cached.__annotations__["message"] = BaseMessage
    return cached, cache


def trim(messages: list[Any], counter: Callable[[Any], int]) -> list[Any]:
    from langchain_core.messages import trim_messages

    return trim_messages(
        messages,
        max_tokens=BUDGET,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )


def compare(
    data: Synthetic, ours: ContextSelection, theirs: list[Any], count: Callable[[Any], int]
) -> dict[str, Any]:
    """Budget checks of both selections and where and why they differ."""
    ours_ids = {node.id for node in ours.nodes}
    theirs_ids = {m.id.split("#")[0] for m in theirs}
    theirs_tokens = sum(count(m) for m in theirs)
    oldest_theirs = min(
        (i for i, node in enumerate(data.path) if node.id in theirs_ids and i > 0), default=0
    )
    only_ours = [n for n in data.path if n.id in ours_ids - theirs_ids]
    only_theirs = [n for n in data.path if n.id in theirs_ids - ours_ids]
    # Tool pairs trim kept one half of (never happens with start_on="human" at the cut, but
    # would with other settings; counted so the report can say so).
    calls = {tc["id"] for m in theirs for tc in getattr(m, "tool_calls", None) or ()}
    outputs = {m.tool_call_id for m in theirs if m.type == "tool"}
    return {
        "ours_turns": ours.turns,
        "theirs_turns": sum(1 for m in theirs if m.type == "human") - 1,
        "ours_tokens": ours.used,
        "theirs_tokens": theirs_tokens,
        "ours_within_budget": ours.used <= BUDGET and not ours.overflow,
        "theirs_within_budget": theirs_tokens <= BUDGET,
        "common_messages": len(ours_ids & theirs_ids),
        "only_ours_older_than_trim_cut": sum(
            1 for n in only_ours if data.path.index(n) < oldest_theirs
        ),
        "only_ours_other": sum(1 for n in only_ours if data.path.index(n) >= oldest_theirs),
        "only_trim_cancelled_or_partial": sum(1 for n in only_theirs if n.status != "complete"),
        "only_trim_in_turn_with_cancelled": sum(
            1
            for n in only_theirs
            if n.status == "complete"
            and any(c.status != "complete" for c in data.graph.children(n.id) if c.id in theirs_ids)
        ),
        "only_trim_other": sum(
            1
            for n in only_theirs
            if n.status == "complete"
            and not any(
                c.status != "complete" for c in data.graph.children(n.id) if c.id in theirs_ids
            )
        ),
        "trim_split_tool_pairs": len(calls ^ outputs),
    }


class _Recorder:
    """A counter that notes the id of every message it is asked to count."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self.ids: set[str] = set()

    def count(self, message_id: str, items: Sequence[Mapping[str, Any]]) -> int:
        self.ids.add(message_id)
        return self.inner.count(message_id, items)


def counted_ids(path: list[Node], counter: TokenCounter) -> set[str]:
    """Ids of the messages a cold build over ``path`` counts."""
    recorder = _Recorder(counter)
    select_context(path, budget=BUDGET, counter=recorder, index=ContextIndex())
    return recorder.ids


def bench_size(
    size: int, counter: TokenCounter, *, quick: bool
) -> tuple[list[Row], dict[str, Any]]:
    data = make_graph(size)
    graph, path = data.graph, data.path
    encoding = counter.encoding
    # The floor encodes exactly the texts our cold build counts: those of the messages it
    # counts (system messages, the active prompt, complete turns; roles and tool names
    # included), not those of stopped attempts or of the prompts they answered.
    counted = counted_ids(path, TokenCounter(encoding=counter.encoding_name))
    texts = [
        text
        for node in path
        if node.id in counted
        for item in node.items
        for text in item_texts(item)[1]
    ]
    lc_messages = to_langchain(path)
    exact = langchain_counter(encoding)
    cached, cache = cached_counter(exact)
    index = ContextIndex()

    heavy = 2 if quick else (3 if size >= 50_000 else 5)
    # Each cold build gets a counter with an empty cache, made and later dropped outside the
    # timed call: freeing the previous build's cache is not part of a build (the raw pass
    # frees nothing either).
    empty = [TokenCounter(encoding=counter.encoding_name) for _ in range(heavy + 1)]
    spent: list[TokenCounter] = []

    def ours_cold() -> ContextSelection:
        cold_counter = empty.pop()
        spent.append(cold_counter)
        return select_context(
            graph.active_path(), budget=BUDGET, counter=cold_counter, index=ContextIndex()
        )

    def ours_warm() -> ContextSelection:
        return select_context(graph.active_path(), budget=BUDGET, counter=counter, index=index)

    def raw_pass() -> int:
        encode = encoding.encode_ordinary
        return sum(len(encode(t)) for t in texts)

    # Ours and the raw pass each run right after a trim run: a case that follows the other
    # finds the texts they share already in the CPU caches (about 6% at 1,000 messages, in
    # favour of whichever runs second).
    cold = interleaved(
        {
            "trim_exact": lambda: trim(lc_messages, exact),
            "ours_cold": ours_cold,
            "trim_exact_again": lambda: trim(lc_messages, exact),
            "raw": raw_pass,
        },
        heavy,
    )
    del spent[:]
    ours_warm()
    trim(lc_messages, cached)
    light = 3 if quick else (5 if size >= 50_000 else 9)
    warm = interleaved({"trim_warm": lambda: trim(lc_messages, cached)}, light)
    warm["ours_warm"] = min(loop_time(ours_warm, 20 if quick else 200) for _ in range(3))
    # The selections themselves, checked against the budget with uncached exact counts.
    ours = ours_warm()
    assert counter.count_items(ours.items) == ours.used, "ours: used is not the exact sum"
    theirs = trim(lc_messages, exact)
    diff = compare(data, ours, theirs, exact)
    diff.update(messages=len(path), langchain_messages=len(lc_messages), cache_entries=len(cache))
    label = f"{size:,} msgs"
    rows = [
        Row(f"{label}: cold build vs raw tiktoken pass", cold["ours_cold"], cold["raw"], "s"),
        Row(f"{label}: cold build vs trim exact", cold["ours_cold"], cold["trim_exact"], "s"),
        Row(f"{label}: warm build vs trim warm cache", warm["ours_warm"], warm["trim_warm"], "s"),
    ]
    diff.update(
        ours_cold_s=cold["ours_cold"],
        ours_warm_s=warm["ours_warm"],
        raw_tiktoken_s=cold["raw"],
        trim_exact_s=cold["trim_exact"],
        trim_warm_s=warm["trim_warm"],
    )
    return rows, diff


def run(*, quick: bool = False, sizes: Sequence[int] | None = None) -> Section:
    counter = TokenCounter(encoding=ENCODING)
    section = Section(
        f"Context selection, budget {BUDGET:,}, exact {ENCODING} counts",
        "ours",
        "trim_messages / floor",
    )
    details: dict[int, dict[str, Any]] = {}
    for size in sizes or (QUICK_SIZES if quick else SIZES):
        rows, diff = bench_size(size, counter, quick=quick)
        section.rows += rows
        details[size] = diff
        section.checks.append(
            f"{size:,} msgs: ours {diff['ours_turns']} turns / {diff['ours_tokens']:,} tokens "
            f"(within budget: {diff['ours_within_budget']}), trim {diff['theirs_turns']} turns / "
            f"{diff['theirs_tokens']:,} tokens (within budget: {diff['theirs_within_budget']}); "
            f"{diff['common_messages']} nodes in both; only ours: "
            f"{diff['only_ours_older_than_trim_cut']} older than trim's cut (trim stops at the "
            f"first turn that does not fit, ours skips it and keeps older cheaper turns), "
            f"{diff['only_ours_other']} other; only trim: "
            f"{diff['only_trim_cancelled_or_partial']} cancelled attempts, "
            f"{diff['only_trim_in_turn_with_cancelled']} prompts of cancelled turns, "
            f"{diff['only_trim_other']} other; split tool pairs in trim: "
            f"{diff['trim_split_tool_pairs']}"
        )
        for rows_row in rows:
            rows_row.extra["size"] = size
    section.notes.append(
        "trim / ours above 1 means ours is faster; the raw tiktoken row is a floor, not a rival "
        "(its ratio is floor / cold build, target ≥ 1/1.1 = 0.91)"
    )
    biggest = {s: d for s, d in details.items() if s == 10_000}
    if biggest:
        d = biggest[10_000]
        section.target(
            "warm build at 10k messages ≤ 100 µs",
            d["ours_warm_s"] <= 100e-6,
            f"{d['ours_warm_s'] * 1e6:.1f} µs",
        )
    for size, d in details.items():
        ratio = d["ours_cold_s"] / d["raw_tiktoken_s"]
        section.target(
            f"cold build ≤ 1.1x raw tiktoken pass ({size:,} msgs)",
            ratio <= 1.1,
            f"{ratio:.2f}x",
        )
    section.details = {str(size): d for size, d in details.items()}
    return section


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
