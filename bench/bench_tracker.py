"""Ledger cost per turn: ``ServerConversationTracker`` vs the SDK's own tracker, driven as in a run.

The run is :mod:`bench._scripted`'s: one prompt, then N responses that each call a tool (every
fifth also carries a message), each tool output being the next request's input. Both trackers
get the same pre-built objects, turn by turn in lockstep; in each turn the side that goes
first alternates, so a turn is one interleaved pair.

- SDK: ``OpenAIServerConversationTracker`` (private SDK code,
  reached through ``agents_state_ext._compat``)
  with the calls its 0.24 run loop makes per turn, in its order: ``prepare_input`` with the
  original input and the previous turn's new items (the whole ``generated_items`` when there
  are none, as on the first turn), the input de-duplication, ``validate_pending_input_filter``,
  ``mark_input_as_sent`` before and after the request, ``mark_input_as_accepted``, and
  ``track_server_items`` twice (once in ``get_new_response``, once after the turn).
- ours: the calls the wrapper makes per request under ``ConversationState.run()`` (after the
  run's start, which clears the undelivered answer once): ``clear_undelivered``, ``reduce`` and
  ``mark_sent`` on the delta, ``acknowledge`` with the
  response, ``record_output`` when the tool's output arrives.

How the driving is checked (:func:`driving_check`, run by every benchmark run): a real
``Runner.run(..., auto_previous_response_id=True)`` and ``Runner.run_streamed`` over the same
scripted model, and a real ``ConversationState.previous_response().run``, with every top-level
call on each tracker class recorded (method, and the kinds and ids of its arguments); the
benchmark's own drivers are recorded the same way over the same turns, and the sequences must
be equal.

Flatness is also counted in instructions (:func:`window_instructions`): callgrind counts our
tracker's turns in the first and the last checkpoint's window of the same run, which the
machine's caches and load cannot move.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.items import (
    MessageOutputItem,
    ModelResponse,
    RunItem,
    ToolCallItem,
    ToolCallOutputItem,
)
from agents.usage import Usage

from agents_state_ext import ConversationState, ServerConversationTracker, _compat

from . import _callgrind as callgrind
from ._common import Pairs, Row, Section, fmt_ratio, fmt_seconds, fmt_spread, median
from ._scripted import PROMPT, CannedModel, lookup_order, recording, response_output, tool_result

# The SDK's own ledger and input de-duplication: private SDK code, reached (like every private
# SDK name) only through agents_state_ext._compat, whose contract tests check it on each minor.
OpenAIServerConversationTracker = _compat.sdk_server_conversation_tracker()
deduplicate_input_items_preferring_latest = _compat.sdk_deduplicate_input_items()

CHECKPOINTS = (50, 200, 800, 2_000)
QUICK_CHECKPOINTS = (10, 40)
WINDOW = 31
"""Turns (pairs) per checkpoint: the window of turns ending at it."""
MESSAGE_EVERY = 5
CHECK_TURNS = 12


@dataclass
class Turn:
    response: ModelResponse
    new_items: list[RunItem]
    """The run items this turn's response adds to ``generated_items``."""
    delta: list[Any]
    """What the SDK hands the model for the *next* turn: this turn's tool output."""
    output: dict[str, Any]
    """The tool output as the wrapper's output hook records it."""


def make_run(turns: int) -> list[Turn]:
    """``turns`` turns of the scripted tool-call run, every object pre-built."""
    agent: Agent[Any] = Agent(name="bench")
    run: list[Turn] = []
    for t in range(1, turns + 1):
        output = response_output(t, turns, MESSAGE_EVERY)
        items: list[RunItem] = []
        for raw in output:
            if raw.type == "message":
                items.append(MessageOutputItem(agent=agent, raw_item=raw))
            else:
                items.append(ToolCallItem(agent=agent, raw_item=raw))
                result = tool_result(f"ord_{t:05d}")
                out_raw = {"call_id": raw.call_id, "output": result, "type": "function_call_output"}
                items.append(ToolCallOutputItem(agent=agent, raw_item=out_raw, output=result))
        response = ModelResponse(output=output, usage=Usage(), response_id=f"resp_{t}")
        call_id = f"call_{t}"
        delta = [{"call_id": call_id, "output": result, "type": "function_call_output"}]
        recorded = {"call_id": call_id, "output": result, "type": "function_call_output"}
        run.append(Turn(response, items, delta, recorded))
    return run


class SdkDriver:
    """The SDK's tracker, called per turn as its run loop calls it."""

    def __init__(self) -> None:
        self.tracker = OpenAIServerConversationTracker(auto_previous_response_id=True)
        self.generated: list[RunItem] = []
        self.pending: list[RunItem] = []

    def turn(self, turn: Turn) -> list[Any]:
        tracker = self.tracker
        items = self.pending if self.pending else self.generated
        prepared = tracker.prepare_input(PROMPT, items)
        filtered = deduplicate_input_items_preferring_latest(list(prepared))
        tracker.validate_pending_input_filter(filtered)
        tracker.mark_input_as_sent(filtered)
        # (the request)
        tracker.mark_input_as_sent(filtered)
        tracker.mark_input_as_accepted(filtered)
        tracker.track_server_items(turn.response)
        # (the turn's tools run; the loop then tracks the turn's response once more)
        tracker.track_server_items(turn.response)
        return filtered

    def after(self, turn: Turn) -> None:
        """Untimed: the loop's own bookkeeping between turns."""
        self.generated = self.generated + turn.new_items
        self.pending = list(turn.new_items)


class OursDriver:
    """Our tracker, called per request as the wrapper calls it under ``ConversationState.run``."""

    def __init__(self) -> None:
        self.tracker = ServerConversationTracker()
        self.delta: list[Any] = [{"content": PROMPT, "role": "user"}]
        self.begun = False

    def turn(self, turn: Turn) -> list[Any]:
        tracker = self.tracker
        if not self.begun:  # the run's start: a new turn goes on after any undelivered answer
            self.begun = True
            tracker.clear_undelivered()
        tracker.clear_undelivered()
        send = tracker.reduce(self.delta)
        tracker.mark_sent(send, replacing=())
        # (the request)
        tracker.acknowledge(turn.response.response_id, turn.response.output, consumed=())
        # (the tool runs; its output hook records the output)
        tracker.record_output(turn.output)
        return send

    def after(self, turn: Turn) -> None:
        self.delta = turn.delta


def lockstep(run: list[Turn]) -> tuple[list[float], list[float], list[list[Any]], list[list[Any]]]:
    """Seconds per turn of each side (one pair per turn, order alternating) and what each sent."""
    sdk, ours = SdkDriver(), OursDriver()
    sdk_times: list[float] = []
    ours_times: list[float] = []
    sdk_sent: list[list[Any]] = []
    ours_sent: list[list[Any]] = []
    clock = time.perf_counter
    sides = ((sdk, sdk_times, sdk_sent), (ours, ours_times, ours_sent))
    gc.collect()
    gc.disable()
    try:
        for t, turn in enumerate(run, start=1):
            for driver, times, sent in sides if t % 2 else sides[::-1]:
                start = clock()
                batch = driver.turn(turn)
                times.append(clock() - start)
                sent.append(batch)
                driver.after(turn)
            if t % 100 == 0:
                gc.collect(1)
    finally:
        gc.enable()
    return sdk_times, ours_times, sdk_sent, ours_sent


def _plain(batch: list[Any]) -> list[dict[str, Any]]:
    """Items as plain dicts without ``id`` and ``status``, to compare what two sides sent."""
    dicts = [i if isinstance(i, dict) else i.model_dump(exclude_unset=True) for i in batch]
    return [{k: v for k, v in d.items() if k not in ("status", "id")} for d in dicts]


def peak_memory(run: list[Turn], side: str) -> tuple[int, int]:
    """(retained, peak) bytes the tracker allocates over the run; every input is pre-built."""
    gc.collect()
    tracemalloc.start()
    try:
        driver: SdkDriver | OursDriver = SdkDriver() if side == "sdk" else OursDriver()
        for turn in run:
            driver.turn(turn)
            driver.after(turn)
        if isinstance(driver, SdkDriver):
            # The loop's generated_items are the run's, not the tracker's.
            driver.generated = driver.pending = []
        current, peak = tracemalloc.get_traced_memory()
        del driver
    finally:
        tracemalloc.stop()
    return current, peak


async def _real_calls(turns: int) -> dict[str, list[tuple[Any, ...]]]:
    """Tracker calls recorded during real runs of the scripted model (per side and mode)."""

    def agent() -> Agent[Any]:
        model = CannedModel(turns, MESSAGE_EVERY)
        return Agent(name="bench", model=model, tools=[lookup_order])

    found: dict[str, list[tuple[Any, ...]]] = {}
    max_turns = turns + 5
    with recording(OpenAIServerConversationTracker) as calls:
        await Runner.run(agent(), PROMPT, auto_previous_response_id=True, max_turns=max_turns)
    found["SDK, Runner.run"] = list(calls)
    with recording(OpenAIServerConversationTracker) as calls:
        streamed = Runner.run_streamed(
            agent(), PROMPT, auto_previous_response_id=True, max_turns=max_turns
        )
        async for _ in streamed.stream_events():
            pass
    found["SDK, Runner.run_streamed"] = list(calls)
    with recording(ServerConversationTracker) as calls:
        await ConversationState.previous_response().run(agent(), PROMPT, max_turns=max_turns)
    found["ours, ConversationState.run"] = list(calls)
    return found


def driving_check(turns: int = CHECK_TURNS) -> dict[str, Any]:
    """Compare the benchmark's driving sequences with the calls real runs make (see module)."""
    set_tracing_disabled(True)
    real = asyncio.run(_real_calls(turns))
    run = make_run(turns)
    driven: dict[str, list[tuple[Any, ...]]] = {}
    for name, cls, driver in (
        ("SDK", OpenAIServerConversationTracker, SdkDriver),
        ("ours", ServerConversationTracker, OursDriver),
    ):
        # The constructor is not a recorded call: build the driver first.
        instance = driver()
        with recording(cls) as calls:
            for turn in run:
                instance.turn(turn)
                instance.after(turn)
        driven[name] = list(calls)
    result: dict[str, Any] = {"turns": turns, "cases": {}}
    for case, calls in real.items():
        mine = driven[case.split(",")[0]]
        # The real run goes on after the bench's turns (the final answer, the end-of-run
        # check); the turns the bench drives must be exactly the real run's first calls.
        same = calls[: len(mine)] == mine and len(calls) > len(mine)
        first_difference = next(
            (i for i, (a, b) in enumerate(zip(calls, mine, strict=False)) if a != b), None
        )
        result["cases"][case] = {
            "same": same,
            "calls_compared": len(mine),
            "first_difference": None
            if first_difference is None
            else {"real": repr(calls[first_difference]), "bench": repr(mine[first_difference])},
        }
    result["same"] = all(c["same"] for c in result["cases"].values())
    return result


def window_instructions(turns: int, checkpoint: int) -> int:
    """Instructions of our tracker's turns in the window ending at ``checkpoint`` (callgrind)."""
    first = max(1, checkpoint - WINDOW + 1)
    args = ["--turns", str(turns), "--first", str(first), "--count", str(checkpoint - first + 1)]
    return callgrind.instructions("bench._callgrind_tracker", args, instrument_at_start=False)


def _instruction_flatness(section: Section, checkpoints: Sequence[int], quick: bool) -> None:
    """The flatness target again, in instructions: what noise and caches cannot move."""
    name = (
        "tracker work per turn flat in run length (callgrind instructions, ours, last / first "
        "checkpoint ≤ 1.5x)"
    )
    reason = "not measured: --quick" if quick else ""
    if not reason and not callgrind.available():
        reason = "not measured: valgrind not found"
    if reason:
        section.target(name, None, reason, ratio=reason)
        section.details["instructions"] = reason
        return
    first, last = checkpoints[0], checkpoints[-1]
    with ThreadPoolExecutor(2) as pool:  # instruction counts do not depend on load
        early = pool.submit(window_instructions, last, first)
        late = pool.submit(window_instructions, last, last)
        counts = early.result(), late.result()
    per_turn = [c / min(WINDOW, n) for c, n in zip(counts, (first, last), strict=True)]
    growth = per_turn[1] / per_turn[0]
    section.target(
        name,
        growth <= 1.5,
        f"{growth:.3f}x from turn {first} to {last:,}",
        ours=f"{per_turn[0] / 1e3:,.1f} k Ir → {per_turn[1] / 1e3:,.1f} k Ir a turn",
        ratio=f"{growth:.3f}x (ours, last / first)",
    )
    section.details["instructions"] = {"per_turn": per_turn, "growth": growth}


def run(*, quick: bool = False, checkpoints: Sequence[int] | None = None) -> Section:
    checkpoints = tuple(checkpoints or (QUICK_CHECKPOINTS if quick else CHECKPOINTS))
    turns = checkpoints[-1]
    check = driving_check(min(CHECK_TURNS, turns))
    data = make_run(turns)
    sdk_times, ours_times, sdk_sent, ours_sent = lockstep(data)
    section = Section(f"Tracker, per turn of a {turns:,}-turn tool-call run", "ours", "SDK tracker")
    section.checks.append(
        f"driving sequences equal the calls of real runs over the first {check['turns']} turns: "
        + "; ".join(
            f"{case}: {c['same']} ({c['calls_compared']} calls)"
            for case, c in check["cases"].items()
        )
    )
    same = all(_plain(a) == _plain(b) for a, b in zip(sdk_sent, ours_sent, strict=True))
    section.checks.append(f"in every turn both trackers sent the same items: {same}")
    per_turn: dict[int, dict[str, Any]] = {}
    for n in checkpoints:
        window = range(max(0, n - WINDOW), n)
        pairs = Pairs([ours_times[t] for t in window], [sdk_times[t] for t in window])
        summary = pairs.summary()
        speedups = pairs.speedups
        per_turn[n] = {**summary, "speedup_median": median(speedups)}
        row = Row(f"turn {n:,} ({len(window)} turns)", summary["ours_median_s"],
                  summary["anchor_median_s"], "s",
                  note=f"SDK / ours {fmt_spread(speedups, fmt_ratio)}")  # fmt: skip
        row.extra["pairs"] = summary
        section.rows.append(row)
    ours_mem = peak_memory(data, "ours")
    sdk_mem = peak_memory(data, "sdk")
    section.rows.append(
        Row(f"peak memory over {turns:,} turns", ours_mem[1], sdk_mem[1], "bytes",
            note=f"retained: ours {ours_mem[0] / 1024:,.0f} KiB, SDK {sdk_mem[0] / 1024:,.0f} KiB")
    )  # fmt: skip
    first, last = per_turn[checkpoints[0]], per_turn[checkpoints[-1]]
    growth = last["ours_median_s"] / first["ours_median_s"]
    window_last = range(max(0, turns - WINDOW), turns)
    section.target(
        "tracker cost per turn flat in run length (ours, last / first checkpoint ≤ 1.5x)",
        growth <= 1.5 and check["same"],
        f"{growth:.2f}x from turn {checkpoints[0]} to {turns:,}",
        ours=f"{fmt_seconds(first['ours_median_s'])} → {fmt_seconds(last['ours_median_s'])}",
        anchor=f"SDK {fmt_seconds(first['anchor_median_s'])} → "
        f"{fmt_seconds(last['anchor_median_s'])}",
        ratio=f"{growth:.2f}x (ours, last / first)",
    )
    _instruction_flatness(section, checkpoints, quick)
    speedups = [sdk_times[t] / ours_times[t] for t in window_last]
    section.target(
        f"≥ 10x faster than the SDK's tracker at turn {turns:,}",
        last["speedup_median"] >= 10 and check["same"],
        f"{fmt_spread(speedups, fmt_ratio)} ({len(window_last)} turns)",
        ours=fmt_spread([ours_times[t] for t in window_last], fmt_seconds),
        anchor=fmt_spread([sdk_times[t] for t in window_last], fmt_seconds),
        ratio=fmt_spread(speedups, fmt_ratio) + " faster",
    )
    section.notes.append(
        "a row's times are the medians of its turns; SDK / ours is the median of the per-turn "
        "ratios [p10-p90]"
    )
    section.details = {
        "driving_check": check,
        "per_turn": {str(n): v for n, v in per_turn.items()},
        "memory": {
            "ours_retained": ours_mem[0],
            "ours_peak": ours_mem[1],
            "sdk_retained": sdk_mem[0],
            "sdk_peak": sdk_mem[1],
        },
        "same_sent_lists": same,
    }
    return section


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
