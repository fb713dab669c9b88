"""Ledger cost per turn: ``ServerConversationTracker`` vs the SDK's internal tracker.

A tool-call run: the user asks once, then every response is one ``function_call`` (every
fifth also carries a short message) whose output is the next request's input. Both trackers
get the same pre-built item objects.

- SDK: ``OpenAIServerConversationTracker`` driven through the calls its run loop makes per
  turn (``prepare_input`` with the run's whole ``generated_items``, the input de-duplication,
  ``validate_pending_input_filter``, ``mark_input_as_sent`` before and after the request,
  ``mark_input_as_accepted``, ``track_server_items``). It is private SDK code, imported here
  only. Turns outside the measured windows pass ``prepare_input`` only the newest items: that
  leaves the tracker in the same state (skipped items change nothing) and keeps its O(n²)
  per-turn scan from dominating the benchmark's own run time.
- ours, delta: ``reduce`` + ``mark_sent`` + ``acknowledge`` on the delta the SDK hands the
  wrapper under ``ConversationState.run()`` (server mode).
- ours, full list: the same, handed the whole replayed list, as when a user calls
  ``Runner.run`` with only ``state.run_config()`` (client mode); building that list is the
  SDK's work and is not timed. The sent list must equal the delta.

Per-turn cost at turn n is the median of the ``WINDOW`` turns ending at n.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents import Agent
from agents.items import (
    MessageOutputItem,
    ModelResponse,
    RunItem,
    ToolCallItem,
    ToolCallOutputItem,
)
from agents.run_internal.items import (
    deduplicate_input_items_preferring_latest,
    run_item_to_input_item,
)
from agents.run_internal.oai_conversation import OpenAIServerConversationTracker
from agents.run_internal.run_loop import _prepare_turn_input_items
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agents_state_ext.tracker import ServerConversationTracker, item_to_dict

from ._common import Row, Section, median

CHECKPOINTS = (50, 200, 800, 2_000)
QUICK_CHECKPOINTS = (10, 50, 100)
WINDOW = 9


@dataclass
class Turn:
    response: ModelResponse
    new_items: list[RunItem]
    """The run items this turn's response adds to ``generated_items``."""
    delta: list[Any]
    """What the SDK hands the model for the *next* turn: this turn's tool output."""


def make_run(turns: int) -> tuple[list[Any], list[Turn]]:
    """The initial input and ``turns`` turns of a tool-call run, all objects pre-built."""
    agent: Agent[Any] = Agent(name="bench")
    original: list[Any] = [{"role": "user", "content": "Check every order, one at a time."}]
    run: list[Turn] = []
    for t in range(1, turns + 1):
        output: list[Any] = []
        items: list[RunItem] = []
        if t % 5 == 0:
            message = ResponseOutputMessage(
                id=f"msg_{t}",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        type="output_text", text=f"Checked {t} orders so far.", annotations=[]
                    )
                ],
            )
            output.append(message)
            items.append(MessageOutputItem(agent=agent, raw_item=message))
        call = ResponseFunctionToolCall(
            id=f"fc_{t}",
            call_id=f"call_{t}",
            type="function_call",
            name="lookup_order",
            arguments=f'{{"order_id": "ord_{t:05d}", "fields": ["status", "eta"]}}',
            status="completed",
        )
        output.append(call)
        items.append(ToolCallItem(agent=agent, raw_item=call))
        result = f"ord_{t:05d}: shipped, arrives in {t % 7 + 1} days"
        out_raw = {"type": "function_call_output", "call_id": call.call_id, "output": result}
        out_item = ToolCallOutputItem(agent=agent, raw_item=out_raw, output=result)
        items.append(out_item)
        response = ModelResponse(output=output, usage=Usage(), response_id=f"resp_{t}")
        converted = run_item_to_input_item(out_item)
        run.append(Turn(response, items, [converted]))
    return original, run


def _windows(checkpoints: Sequence[int]) -> set[int]:
    return {t for n in checkpoints for t in range(max(1, n - WINDOW + 1), n + 1)}


def drive_sdk(
    original: list[Any], run: list[Turn], measured: set[int], timer: Callable[[], float]
) -> tuple[dict[int, float], list[list[Any]]]:
    tracker = OpenAIServerConversationTracker(auto_previous_response_id=True)
    generated: list[RunItem] = []
    times: dict[int, float] = {}
    sent: list[list[Any]] = []
    newest: list[RunItem] = []
    for t, turn in enumerate(run, start=1):
        items = generated if t in measured else newest
        start = timer()
        prepared = tracker.prepare_input(original, items)
        filtered = deduplicate_input_items_preferring_latest(prepared)
        tracker.validate_pending_input_filter(filtered)
        tracker.mark_input_as_sent(filtered)
        # (the request)
        tracker.mark_input_as_sent(filtered)
        tracker.mark_input_as_accepted(filtered)
        tracker.track_server_items(turn.response)
        times[t] = timer() - start
        if t in measured:
            sent.append(filtered)
        generated.extend(turn.new_items)
        newest = turn.new_items
    return times, sent


def drive_ours(
    original: list[Any],
    run: list[Turn],
    full_at: set[int],
    timer: Callable[[], float],
) -> tuple[dict[int, float], list[list[Any]]]:
    tracker = ServerConversationTracker()
    generated: list[RunItem] = []
    times: dict[int, float] = {}
    sent: list[list[Any]] = []
    delta: list[Any] = list(original)
    for t, turn in enumerate(run, start=1):
        full = t in full_at
        items = _prepare_turn_input_items(original, generated, None) if full else delta
        start = timer()
        send = tracker.reduce(items)
        tracker.mark_sent(send)
        tracker.acknowledge(turn.response.response_id, list(turn.response.output))
        times[t] = timer() - start
        if full:
            sent.append(send)
        generated.extend(turn.new_items)
        delta = turn.delta
    return times, sent


def _same(a: list[list[Any]], b: list[list[Any]]) -> bool:
    def plain(batch: list[Any]) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in item_to_dict(i).items() if k not in ("status", "id")} for i in batch
        ]

    return len(a) == len(b) and all(plain(x) == plain(y) for x, y in zip(a, b, strict=True))


def peak_memory(original: list[Any], run: list[Turn], side: str) -> tuple[int, int]:
    """(retained, peak) bytes the tracker allocates over the run; every input is pre-built."""
    generated = [item for turn in run for item in turn.new_items]
    gc.collect()
    tracemalloc.start()
    try:
        if side == "ours":
            ours = ServerConversationTracker()
            delta: list[Any] = list(original)
            for turn in run:
                ours.mark_sent(ours.reduce(delta))
                ours.acknowledge(turn.response.response_id, turn.response.output)
                delta = turn.delta
            kept: object = ours
        else:
            sdk = OpenAIServerConversationTracker(auto_previous_response_id=True)
            newest: list[RunItem] = []
            for t, turn in enumerate(run, start=1):
                # The last turn gets the whole run, as the run loop passes it.
                items = generated[: -len(turn.new_items)] if t == len(run) else newest
                filtered = deduplicate_input_items_preferring_latest(
                    sdk.prepare_input(original, items)
                )
                sdk.validate_pending_input_filter(filtered)
                sdk.mark_input_as_sent(filtered)
                sdk.mark_input_as_sent(filtered)
                sdk.mark_input_as_accepted(filtered)
                sdk.track_server_items(turn.response)
                newest = turn.new_items
            kept = sdk
        current, peak = tracemalloc.get_traced_memory()
        del kept
    finally:
        tracemalloc.stop()
    return current, peak


def run(*, quick: bool = False, checkpoints: Sequence[int] | None = None) -> Section:
    checkpoints = tuple(checkpoints or (QUICK_CHECKPOINTS if quick else CHECKPOINTS))
    turns = checkpoints[-1]
    original, turns_data = make_run(turns)
    measured = _windows(checkpoints)
    timer = time.perf_counter
    gc.disable()
    try:
        sdk_times, sdk_sent = drive_sdk(original, turns_data, measured, timer)
        delta_times, _ = drive_ours(original, turns_data, set(), timer)
        full_times, full_sent = drive_ours(original, turns_data, measured, timer)
    finally:
        gc.enable()
    section = Section(
        f"Tracker, per turn of a {turns:,}-turn tool-call run",
        "ours",
        "SDK tracker",
    )
    # Which sent lists does each side produce in the windows? They must be the same deltas.
    same = _same(sdk_sent, full_sent)
    section.checks.append(
        f"in the measured turns the SDK and our full-list reduce sent the same items: {same}"
    )
    per_turn: dict[int, dict[str, float]] = {}
    for n in checkpoints:
        window = [t for t in range(n - WINDOW + 1, n + 1) if t >= 1]
        sdk = median([sdk_times[t] for t in window])
        delta = median([delta_times[t] for t in window])
        full = median([full_times[t] for t in window])
        per_turn[n] = {"sdk_s": sdk, "ours_delta_s": delta, "ours_full_list_s": full}
        section.rows.append(Row(f"turn {n:,}: ours (delta) vs SDK", delta, sdk, "s"))
        section.rows.append(Row(f"turn {n:,}: ours (full list) vs SDK", full, sdk, "s"))

    ours_mem = peak_memory(original, turns_data, "ours")
    sdk_mem = peak_memory(original, turns_data, "sdk")
    section.rows.append(
        Row(f"peak memory at {turns:,} turns", ours_mem[1], sdk_mem[1], "bytes",
            note=f"retained: ours {ours_mem[0] / 1024:,.0f} KiB, SDK {sdk_mem[0] / 1024:,.0f} KiB")
    )  # fmt: skip
    first, last = per_turn[checkpoints[0]], per_turn[checkpoints[-1]]
    growth = last["ours_delta_s"] / first["ours_delta_s"]
    section.target(
        "tracker cost per turn flat in run length (delta, last / first checkpoint ≤ 1.5)",
        growth <= 1.5,
        f"{growth:.2f}x from turn {checkpoints[0]} to {checkpoints[-1]}; full list: "
        f"{last['ours_full_list_s'] / first['ours_full_list_s']:.1f}x (O(n) per turn)",
    )
    speedup = last["sdk_s"] / last["ours_delta_s"]
    section.target(
        f"≥ 10x faster than the SDK's at turn {turns:,}",
        speedup >= 10,
        f"delta {speedup:,.0f}x, full list {last['sdk_s'] / last['ours_full_list_s']:,.1f}x",
    )
    section.details = {
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
