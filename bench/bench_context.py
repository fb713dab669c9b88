"""Context selection: ``select_context`` vs LangChain's ``trim_messages`` on the same history.

Both sides count with the exact tiktoken ``o200k_base`` encoding and the same per-message
framing (3 + role + text; a tool call 3 + name + arguments; a tool output 3 + output), and both
do the same counter work: the role and tool-name tokens are counted once and reused (ours
caches short texts; the LangChain counter here precomputes the role tokens and caches names).
Every comparison is a run of interleaved pairs (:func:`bench._common.timed_pairs`).

Rows, per history size:

- warm select vs trim exact: nothing changed since the last build; ours with the
  conversation's warm ``ContextIndex`` and counter, trim with an uncached exact counter
  (trim calls it on prefixes: O(n log n)). trim keeps no state, so this is also its cost for
  every request.
- warm select vs trim warm cache: trim with a per-message cache keyed by message id, filled.
- one new turn, then select: the realistic per-request cost. The pending attempt completes
  with an answer, the user sends the next prompt, and the next request is built; on trim's
  side the same two messages are appended to its list and trimmed with the warm cache. Each
  pair adds one turn to both sides.
- its floor: the same pairs against the same trim step, our side only encoding the next
  turn's two texts exactly (what any exact counter pays for that row); printed under the
  page's table.
- cold counting vs a raw tiktoken pass: ours with an empty counter and a new
  ``ContextIndex``, so every message it indexes is encoded; the raw pass is
  ``encode_ordinary`` over exactly the texts that build counts (system messages, the active
  prompt and the complete turns, roles and tool names included), one call per text as ours.
- memory: what a ``ConversationGraph`` of the history retains against the same messages as
  the SDK's item list (plain input-item dicts), both decoded from the same JSON, measured
  with tracemalloc.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents_state_ext import (
    ContextIndex,
    ContextSelection,
    ConversationGraph,
    Node,
    TokenCounter,
    select_context,
)

from ._common import (
    BUDGET,
    Pairs,
    Row,
    Section,
    Synthetic,
    fmt_ratio,
    fmt_seconds,
    fmt_spread,
    make_graph,
    median,
    pair_cells,
    text,
    timed_pairs,
)

SIZES = (10_000, 100_000)
QUICK_SIZES = (200, 400)
ENCODING = "o200k_base"
MEMORY_SIZE = 10_000
PAIRS = {"fast": 30, "trim_exact": 30, "cold": 15}
"""Pairs per row at 10k; at 100k the slow rows (trim exact, cold) get :data:`BIG_PAIRS`."""
BIG_PAIRS = {"fast": 30, "trim_exact": 7, "cold": 7}
QUICK_PAIRS = {"fast": 5, "trim_exact": 3, "cold": 3}
INNER = 20
"""A warm select takes microseconds: each of its samples is the mean of this many calls."""


def item_texts(item: Mapping[str, Any]) -> list[str]:
    """The texts one input item is counted as: role and text parts, name and arguments, output."""
    kind = item.get("type")
    if kind == "function_call":
        return [item["name"], item["arguments"]]
    if kind == "function_call_output":
        return [item["output"]]
    content = item["content"]
    parts = [content] if isinstance(content, str) else [part["text"] for part in content]
    return [item["role"], *parts]


def _takes_graph() -> bool:
    """Whether ``select_context`` accepts the ``ConversationGraph`` itself (newer versions)."""
    graph = ConversationGraph("conv_probe")
    graph.add_system("probe")
    graph.add_user("probe")
    try:
        select_context(graph, budget=BUDGET, counter=TokenCounter(encoding=ENCODING))  # type: ignore[call-overload, unused-ignore]
    except Exception:
        return False
    return True


def select_ours(graph: ConversationGraph, counter: TokenCounter, index: ContextIndex) -> Any:
    """The build a chat makes for its next request, with the conversation's index.

    Given the graph itself when ``select_context`` takes it (it then reads the graph's own
    active path), else the graph's active path.
    """
    if TAKES_GRAPH:
        return select_context(graph, budget=BUDGET, counter=counter, index=index)  # type: ignore[call-overload, unused-ignore]
    return select_context(graph.active_path(), budget=BUDGET, counter=counter, index=index)


TAKES_GRAPH = _takes_graph()


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
    """An exact per-message counter with ``TokenCounter``'s framing and short-text reuse.

    Role tokens are counted once up front and tool names once each, as ours counts a short
    text once; only the message's own text is encoded per call.
    """
    from langchain_core.messages import BaseMessage

    encode = encoding.encode_ordinary
    role_tokens = {kind: len(encode(role)) for kind, role in _ROLES.items()}
    name_tokens: dict[str, int] = {}

    def name(value: str) -> int:
        hit = name_tokens.get(value)
        if hit is None:
            hit = name_tokens[value] = len(encode(value))
        return hit

    def count(message: BaseMessage) -> int:
        tool_calls = getattr(message, "tool_calls", None)
        if tool_calls:
            return sum(3 + name(c["name"]) + len(encode(json.dumps(c["args"]))) for c in tool_calls)
        if message.type == "tool":
            return 3 + len(encode(str(message.content)))
        return 3 + role_tokens[message.type] + len(encode(str(message.content)))

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
    position = {node.id: i for i, node in enumerate(data.path)}
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
            1 for n in only_ours if position[n.id] < oldest_theirs
        ),
        "only_ours_other": sum(1 for n in only_ours if position[n.id] >= oldest_theirs),
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


def _new_turns(count: int, seed: int) -> list[tuple[list[dict[str, Any]], str]]:
    """The answers and next prompts of ``count`` new turns, pre-built."""
    import random

    rng = random.Random(seed)
    turns = []
    for _ in range(count):
        answer = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text(rng)}],
        }
        turns.append(([answer], text(rng)))
    return turns


def bench_size(size: int, pairs: Mapping[str, int]) -> dict[str, Any]:
    """Every timed row at one history size; the pairs and the selection checks."""
    from langchain_core.messages import AIMessage, HumanMessage

    data = make_graph(size)
    graph, path = data.graph, data.path
    counter = TokenCounter(encoding=ENCODING)
    encoding = counter.encoding
    counted = counted_ids(path, TokenCounter(encoding=ENCODING))
    texts = [t for node in path if node.id in counted for item in node.items
             for t in item_texts(item)]  # fmt: skip
    lc_messages = to_langchain(path)
    exact = langchain_counter(encoding)
    cached, cache = cached_counter(exact)
    index = ContextIndex()
    result: dict[str, Any] = {"messages": len(path), "langchain_messages": len(lc_messages)}

    # Cold counting: a fresh counter and index per build, made outside the timed call.
    fresh = [TokenCounter(encoding=ENCODING) for _ in range(pairs["cold"] + 1)]

    def ours_cold() -> ContextSelection:
        return select_ours(graph, fresh.pop(), ContextIndex())  # type: ignore[no-any-return]

    def raw_pass() -> int:
        encode = encoding.encode_ordinary
        return sum(len(encode(t)) for t in texts)

    result["cold_vs_raw"] = timed_pairs(ours_cold, raw_pass, pairs["cold"])
    del fresh[:]

    def ours_warm() -> Any:
        return select_ours(graph, counter, index)

    ours_warm()
    trim(lc_messages, cached)
    result["warm_vs_trim_exact"] = timed_pairs(
        ours_warm, lambda: trim(lc_messages, exact), pairs["trim_exact"], inner_ours=INNER
    )
    result["warm_vs_trim_cached"] = timed_pairs(
        ours_warm, lambda: trim(lc_messages, cached), pairs["fast"], inner_ours=INNER
    )
    # The selections themselves, checked against the budget with uncached exact counts.
    ours = ours_warm()
    assert counter.count_items(ours.items) == ours.used, "ours: used is not the exact sum"
    theirs = trim(lc_messages, exact)
    result["check"] = compare(data, ours, theirs, exact)
    result["check"]["cache_entries"] = len(cache)

    # One new turn, then the next request: each call adds a turn to its own side.
    supply = _new_turns(2 * pairs["fast"] + 4, seed=size)
    ours_supply, theirs_supply, floor_supply = iter(supply), iter(supply), iter(supply)
    counter_ids = iter(range(10**9))

    def ours_turn() -> Any:
        items, prompt = next(ours_supply)
        attempt = graph.start_attempt()
        graph.complete(attempt.id, items=items)
        graph.add_user(prompt)
        return select_ours(graph, counter, index)

    def theirs_turn() -> Any:
        items, prompt = next(theirs_supply)
        n = next(counter_ids)
        answer = items[0]["content"][0]["text"]
        lc_messages.append(AIMessage(content=answer, id=f"new_answer_{n}"))
        lc_messages.append(HumanMessage(content=prompt, id=f"new_prompt_{n}"))
        return trim(lc_messages, cached)

    result["new_turn"] = timed_pairs(ours_turn, theirs_turn, pairs["fast"])

    # The floor of that row for any exact counter: the two new messages' texts encoded, and
    # nothing else, in the same pairs against the same trim step (the next turns' texts).
    encode = encoding.encode_ordinary

    def floor_turn() -> int:
        items, prompt = next(floor_supply)
        return len(encode(items[0]["content"][0]["text"])) + len(encode(prompt))

    for _ in range(pairs["fast"] + 1):  # the texts the first run already used
        next(floor_supply)
    result["new_turn_floor"] = timed_pairs(floor_turn, theirs_turn, pairs["fast"])
    ours = select_ours(graph, counter, index)
    result["check"]["after_new_turns_within_budget"] = ours.used <= BUDGET and not ours.overflow
    return result


def _decode_graph(plan: list[list[Any]]) -> ConversationGraph:
    """A graph built through its API from decoded (role, status, items) triples."""
    graph = ConversationGraph("conv_memory")
    for role, status, items in plan:
        if role == "system":
            graph.add_system(items[0]["content"])
        elif role == "user":
            graph.add_user(items[0]["content"])
        elif status == "complete":
            graph.complete(graph.start_attempt().id, items=items)
        else:
            attempt = graph.start_attempt()
            graph.stream(attempt.id, items[-1]["content"] if items else "")
            graph.stop(attempt.id)
    return graph


def _retained(build: Callable[[], object]) -> int:
    """Bytes that what ``build`` returns keeps alive (tracemalloc, after a collection)."""
    gc.collect()
    tracemalloc.start()
    try:
        kept = build()
        gc.collect()
        current, _ = tracemalloc.get_traced_memory()
        del kept
    finally:
        tracemalloc.stop()
    return current


def memory(size: int) -> dict[str, Any]:
    """A graph of ``size`` messages against the same messages as the SDK's item list."""
    path = make_graph(size).path
    plan = json.dumps([[n.role, n.status, n.items] for n in path], ensure_ascii=False)

    def sdk_items() -> list[Any]:
        return [item for _, _, items in json.loads(plan) for item in items]

    def ours() -> ConversationGraph:
        return _decode_graph(json.loads(plan))

    graph = ours()
    same = [i for n in graph.active_path() for i in n.items] == sdk_items()
    del graph
    ours_bytes = [_retained(ours) for _ in range(2)]
    sdk_bytes = [_retained(sdk_items) for _ in range(2)]
    return {
        "messages": len(path),
        "ours_bytes": min(ours_bytes),
        "sdk_bytes": min(sdk_bytes),
        "ratio": min(ours_bytes) / min(sdk_bytes),
        "same_items": same,
    }


def _label(size: int) -> str:
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else f"{size:,}"


def run(
    *, quick: bool = False, sizes: Sequence[int] | None = None, memory_size: int | None = None
) -> Section:
    sizes = tuple(sizes or (QUICK_SIZES if quick else SIZES))
    section = Section(
        f"Context selection, budget {BUDGET:,}, exact {ENCODING} counts", "ours", "anchor"
    )
    details: dict[str, Any] = {}
    for n, size in enumerate(sizes):
        pairs = QUICK_PAIRS if quick else (BIG_PAIRS if n else PAIRS)
        result = bench_size(size, pairs)
        label = f"{_label(size)} msgs"
        d = details[str(size)] = {k: v for k, v in result.items() if not isinstance(v, Pairs)}
        rows: list[tuple[str, str, Pairs]] = [
            ("warm select vs trim exact", "trim exact", result["warm_vs_trim_exact"]),
            ("warm select vs trim warm cache", "trim warm cache", result["warm_vs_trim_cached"]),
            ("one new turn, then select vs trim warm cache", "trim warm cache",
             result["new_turn"]),
            ("cold counting vs raw tiktoken pass", "raw tiktoken", result["cold_vs_raw"]),
        ]  # fmt: skip
        for case, anchor, timed in rows:
            summary = timed.summary()
            d[case] = summary
            row = Row(f"{label}: {case}", summary["ours_median_s"], summary["anchor_median_s"],
                      "s", note=f"{anchor}; {len(timed.ours)} pairs, per pair anchor / ours "
                      f"{fmt_spread(timed.speedups, fmt_ratio)}")  # fmt: skip
            row.extra.update(size=size, pairs=summary)
            section.rows.append(row)
        # The floor is not a comparison (its side does less work than trim's): no ratio.
        floor = result["new_turn_floor"]
        d["floor"] = floor.summary()
        note = (
            f"{len(floor.ours)} calls, each in a pair with trim's new-turn step (which leaves "
            "the caches as in the row above); not a comparison"
        )
        case = f"{label}: floor of one new turn: its two exact encodes alone"
        row = Row(case, median(floor.ours), None, "s", note=note)
        row.extra.update(size=size, pairs=d["floor"])
        section.rows.append(row)
        c = d["check"]
        section.checks.append(
            f"{label}: ours {c['ours_turns']} turns / {c['ours_tokens']:,} tokens (within budget: "
            f"{c['ours_within_budget']}), trim {c['theirs_turns']} turns / "
            f"{c['theirs_tokens']:,} tokens (within budget: {c['theirs_within_budget']}); "
            f"{c['common_messages']} nodes in both; only ours: "
            f"{c['only_ours_older_than_trim_cut']} older than trim's cut (trim stops at the "
            f"first turn that does not fit, ours skips it and keeps older cheaper turns), "
            f"{c['only_ours_other']} other; only trim: {c['only_trim_cancelled_or_partial']} "
            f"cancelled attempts, {c['only_trim_in_turn_with_cancelled']} prompts of cancelled "
            f"turns, {c['only_trim_other']} other; split tool pairs in trim: "
            f"{c['trim_split_tool_pairs']}; after the new turns within budget: "
            f"{c['after_new_turns_within_budget']}"
        )
        warm = result["warm_vs_trim_exact"]
        section.target(
            f"warm select ≤ 50 µs at {_label(size)} messages",
            median(warm.ours) <= 50e-6,
            fmt_spread(warm.ours, fmt_seconds),
            ours=fmt_spread(warm.ours, fmt_seconds),
        )
        if n == 0:
            section.target(
                f"warm select ≥ 4,000x faster than trim_messages exact at {_label(size)}",
                median(warm.speedups) >= 4000,
                fmt_spread(warm.speedups, fmt_ratio),
                **pair_cells(warm, speedup=True),
            )
            turn = result["new_turn"]
            section.target(
                f"one new turn, then select ≤ 100 µs at {_label(size)} messages",
                median(turn.ours) <= 100e-6,
                fmt_spread(turn.ours, fmt_seconds),
                **pair_cells(turn),
            )
            floor = result["new_turn_floor"]
            d["new_turn_floor_median_s"] = median(floor.ours)
            section.page_notes.append(
                f"The one-new-turn row's floor at {_label(size)} messages: the two new "
                "messages' texts encoded exactly and nothing else, in pairs against the same "
                f"trim step in this run: {fmt_spread(floor.ours, fmt_seconds)} (ours, all of "
                f"it: {fmt_spread(turn.ours, fmt_seconds)}). No exact counter makes the row "
                "cost less than its floor on this machine."
            )
            # What ran just before each of our calls: in odd pairs the anchor's trim (over the
            # whole history), in even pairs our own previous call and a collection (pair 0
            # follows the warm-up's trim). Reported, not a target: the caches' share of the row.
            after_trim, after_ours = turn.ours[1::2], turn.ours[2::2]
            if after_trim and after_ours:
                d["new_turn_by_predecessor"] = {
                    "after_trim_median_s": median(after_trim),
                    "after_own_call_median_s": median(after_ours),
                }
                section.notes.append(
                    f"{label}: one new turn, then select: ours right after trim's call "
                    f"{fmt_spread(after_trim, fmt_seconds)}, right after its own previous call "
                    f"{fmt_spread(after_ours, fmt_seconds)} ({len(after_trim)} and "
                    f"{len(after_ours)} samples)"
                )
        cold = result["cold_vs_raw"]
        section.target(
            f"cold counting ≤ 1.2x one raw tiktoken pass at {_label(size)} messages",
            median(cold.ratios) <= 1.2,
            fmt_spread(cold.ratios, fmt_ratio),
            **pair_cells(cold),
        )
    mem_size = memory_size or (sizes[0] if quick else MEMORY_SIZE)
    mem = memory(mem_size)
    details["memory"] = mem
    section.rows.append(
        Row(f"{_label(mem_size)} msgs: memory, graph vs the SDK's item list", mem["ours_bytes"],
            mem["sdk_bytes"], "bytes", note=f"same items: {mem['same_items']}")
    )  # fmt: skip
    section.target(
        f"memory of a {_label(mem_size)}-message graph ≤ 1.2x the SDK's item list",
        mem["ratio"] <= 1.2 and mem["same_items"],
        f"{mem['ratio']:.2f}x",
        ours=f"{mem['ours_bytes'] / 2**20:.1f} MiB",
        anchor=f"{mem['sdk_bytes'] / 2**20:.1f} MiB",
        ratio=f"{mem['ratio']:.2f}x",
    )
    entry = (
        "select_context(graph, ...)" if TAKES_GRAPH else "select_context(graph.active_path(), ...)"
    )
    section.notes.append(f"ours builds with {entry}")
    details["entry"] = entry
    section.notes.append(
        "each row: medians of interleaved pairs; the note gives the median [p10-p90] of the "
        "per-pair anchor / ours (above 1: ours is faster); the memory row's ratio is SDK / ours"
    )
    section.details = details
    return section


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
