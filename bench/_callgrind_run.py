"""One scripted run of one side of the wrapper benchmark, for counting instructions under callgrind.

``python -m bench._callgrind_run --side ours|sdk --turns N [--streamed] [--runs R]``: imports
everything and makes one untimed warm-up run; then, when started by :mod:`bench.bench_wrapper`
under ``valgrind --tool=callgrind --instr-atstart=no --toggle-collect=sys_call_tracing``,
switches the instrumentation on and makes ``R`` runs inside ``sys.call_tracing``, the one
function whose instructions callgrind collects. Imports, start-up and the warm-up are not
counted, only the runs (each in a new event loop, the same on both sides).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from agents import Agent, Runner, set_tracing_disabled

from agents_state_ext import ConversationState

from ._callgrind import UNDER_CALLGRIND, instrumentation_on
from ._scripted import PROMPT, CannedModel, lookup_order


async def one_run(side: str, turns: int, streamed: bool) -> int:
    """One run of ``turns`` tool calls and an answer; returns the number of model responses."""
    agent: Agent[Any] = Agent(name="bench", model=CannedModel(turns), tools=[lookup_order])
    max_turns = turns + 5
    result: Any
    if side == "ours":
        state = ConversationState.previous_response()
        if streamed:
            result = state.run_streamed(agent, PROMPT, max_turns=max_turns)
            async for _ in result.stream_events():
                pass
        else:
            result = await state.run(agent, PROMPT, max_turns=max_turns)
    else:
        kwargs: dict[str, Any] = {"max_turns": max_turns, "auto_previous_response_id": True}
        if streamed:
            result = Runner.run_streamed(agent, PROMPT, **kwargs)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, PROMPT, **kwargs)
    return len(result.raw_responses)


async def many(side: str, turns: int, streamed: bool, runs: int) -> list[int]:
    return [await one_run(side, turns, streamed) for _ in range(runs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._callgrind_run")
    parser.add_argument("--side", choices=("ours", "sdk"), required=True)
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--streamed", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    set_tracing_disabled(True)
    asyncio.run(many(args.side, args.turns, args.streamed, 1))
    if os.environ.get(UNDER_CALLGRIND) == "1":
        instrumentation_on()
    responses = sys.call_tracing(
        asyncio.run, (many(args.side, args.turns, args.streamed, args.runs),)
    )
    print(f"responses per run: {responses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
