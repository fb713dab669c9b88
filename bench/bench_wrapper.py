"""Wrapper overhead: ``ConversationState.previous_response().run()`` vs the SDK's own chaining.

One agent with one function tool; a run of N turns is N tool-call responses and a final text
answer (N + 1 model requests; :mod:`bench._scripted`). Ours:
``ConversationState.previous_response().run(...)`` / ``.run_streamed(...)``, a new state per
run. Theirs: ``Runner.run(..., auto_previous_response_id=True)``, the SDK's own
``previous_response_id`` chaining. Both with ``max_turns`` raised to N + 5.

Two backends: the stateful mock Responses API (``MockResponsesAPI``, real ``AsyncOpenAI`` and
``OpenAIResponsesModel`` over an httpx2 MockTransport, so HTTP and parsing are in the loop) and
a no-network ``Model`` that plays canned responses, which isolates the CPU cost of the SDK and
the wrapper. Each cell is at least 30 interleaved pairs of runs; its overhead is the median of
the per-pair ratios ours / SDK, minus one, with its p10-p90.

The deterministic figure: the instructions both sides execute for the same scripted canned
run, counted by ``valgrind --tool=callgrind`` (:mod:`bench._callgrind_run`); noise on the
machine cannot move it. Without valgrind the row says it was not measured.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agents import Agent, ModelSettings, Runner, set_tracing_disabled
from agents.models.interface import Model

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply, ResponseContext

from . import _callgrind as callgrind
from ._common import Pairs, Row, Section, fmt_spread, interleaved_pairs, median, pair_cells
from ._scripted import PROMPT, CannedModel, lookup_order

LENGTHS = (1, 10, 50)
QUICK_LENGTHS = (1, 3)
PAIRS = 30
QUICK_PAIRS = 3
CALLGRIND_TURNS = 20
CALLGRIND_RUNS = 3
TARGET = 0.05


def _mock_responder(tool_calls: int) -> Callable[[ResponseContext], Reply]:
    def respond(ctx: ResponseContext) -> Reply:
        if ctx.call_index < tool_calls:
            return Reply.tool_call("lookup_order", {"order_id": f"ord_{ctx.call_index:05d}"})
        return Reply.text("All on time.")

    return respond


async def _consume(result: Any) -> None:
    async for _ in result.stream_events():
        pass


class Cell:
    """One cell (backend, streamed, N): fresh fixtures before each run, both sides' runners."""

    def __init__(self, backend: str, streamed: bool, turns: int) -> None:
        self.backend, self.streamed, self.turns = backend, streamed, turns
        self.mock: MockResponsesAPI | None = MockResponsesAPI() if backend == "mock" else None
        self.model: Model | None = None
        self.settings = ModelSettings(store=True)
        self.last: dict[str, Any] = {}

    def before(self) -> None:
        """Untimed: a reset mock (or a new canned model), and a young collection."""
        if self.mock is not None:
            self.mock.reset()
            self.mock.responder = _mock_responder(self.turns)
            self.model = self.mock.model()
        else:
            self.model = CannedModel(self.turns)
        # Young and middle generations only: a full collection of the process's heap (the
        # tokenizer's ranks, the SDK's modules) takes longer than a short run.
        gc.collect(1)

    def agent(self) -> Agent[Any]:
        assert self.model is not None
        return Agent(name="bench", model=self.model, tools=[lookup_order],
                     model_settings=self.settings)  # fmt: skip

    async def ours(self) -> None:
        max_turns = self.turns + 5
        state = ConversationState.previous_response()
        if self.streamed:
            result: Any = state.run_streamed(self.agent(), PROMPT, max_turns=max_turns)
            await _consume(result)
        else:
            result = await state.run(self.agent(), PROMPT, max_turns=max_turns)
        self.last["ours"] = result

    async def sdk(self) -> None:
        kwargs: dict[str, Any] = {"max_turns": self.turns + 5, "auto_previous_response_id": True}
        if self.streamed:
            result: Any = Runner.run_streamed(self.agent(), PROMPT, **kwargs)
            await _consume(result)
        else:
            result = await Runner.run(self.agent(), PROMPT, **kwargs)
        self.last["sdk"] = result

    async def check(self, side: str, run: Callable[[], Awaitable[None]]) -> list[str]:
        """One untimed run of a side: N + 1 requests, and one item per chained request."""
        self.before()
        await run()
        problems = []
        requests = len(self.last[side].raw_responses)
        if requests != self.turns + 1:
            problems.append(f"{side} made {requests} requests, expected {self.turns + 1}")
        if self.mock is not None and any(
            len(body["input"]) != 1 for body in self.mock.response_requests[1:]
        ):
            problems.append(f"{side} re-sent history on the wire")
        return problems

    @property
    def name(self) -> str:
        mode = "streamed" if self.streamed else "not streamed"
        return f"{self.backend}, {mode}, {self.turns} turns"


async def _time_cell(cell: Cell, pairs: int) -> tuple[Pairs, list[str]]:
    if cell.mock is not None:
        cell.mock.start()
    try:
        timed = await interleaved_pairs(cell.ours, cell.sdk, pairs, warmup=1, before=cell.before)
        problems = await cell.check("ours", cell.ours) + await cell.check("sdk", cell.sdk)
    finally:
        if cell.mock is not None:
            cell.mock.stop()
            await cell.mock.aclose()
    return timed, problems


def callgrind_instructions(side: str, turns: int, streamed: bool) -> int | None:
    """Instructions executed by ``CALLGRIND_RUNS`` scripted runs of one side, or None."""
    if not callgrind.available():
        return None
    args = ["--side", side, "--turns", str(turns), "--runs", str(CALLGRIND_RUNS)]
    args += ["--streamed"] if streamed else []
    return callgrind.instructions("bench._callgrind_run", args, instrument_at_start=False)


def _callgrind(section: Section, quick: bool) -> None:
    if quick:
        reason = "not measured: --quick"
    elif shutil.which("valgrind") is None:
        reason = "not measured: valgrind not found"
    else:
        reason = ""
    worst: float | None = None
    cells: dict[str, Any] = {}
    for streamed in (False, True):
        mode = "streamed" if streamed else "not streamed"
        case = f"instructions (callgrind), canned, {mode}, {CALLGRIND_TURNS} turns"
        if reason:
            section.rows.append(Row(case, None, None, "Ir", note=reason))
            continue
        # Instruction counts do not depend on load: both sides run at once.
        with ThreadPoolExecutor(2) as pool:
            ours_run = pool.submit(callgrind_instructions, "ours", CALLGRIND_TURNS, streamed)
            sdk_run = pool.submit(callgrind_instructions, "sdk", CALLGRIND_TURNS, streamed)
            ours, sdk = ours_run.result(), sdk_run.result()
        assert ours is not None and sdk is not None
        overhead = ours / sdk - 1
        worst = overhead if worst is None else max(worst, overhead)
        cells[case] = {"ours_ir": ours, "sdk_ir": sdk, "overhead": overhead}
        section.rows.append(Row(case, ours, sdk, "Ir", note=f"overhead {overhead * 100:+.2f}%"))
    name = (
        f"wrapper overhead ≤ 5% in instructions executed (callgrind, canned, "
        f"{CALLGRIND_TURNS} turns, {CALLGRIND_RUNS} runs a side)"
    )
    if worst is None:
        section.target(name, None, reason, ratio=reason)
    else:
        parts = {c: v for c, v in cells.items()}
        section.target(
            name,
            worst <= TARGET,
            f"worst {worst * 100:+.2f}%",
            ours="; ".join(f"{v['ours_ir'] / 1e6:,.0f} M Ir" for v in parts.values()),
            anchor="; ".join(f"{v['sdk_ir'] / 1e6:,.0f} M Ir" for v in parts.values()),
            ratio="; ".join(f"{v['overhead'] * 100:+.2f}%" for v in parts.values())
            + " (not streamed; streamed)",
        )
    section.details["callgrind"] = cells or reason


async def _run(lengths: Sequence[int], pairs: int, quick: bool) -> Section:
    section = Section(
        "Wrapper overhead: Runner runs of N tool-call turns (N + 1 requests)",
        "ours (ConversationState)",
        "SDK previous_response_id",
    )
    details: dict[str, Any] = {}
    worst: tuple[float, str, Pairs] | None = None
    problems: list[str] = []
    for backend in ("canned", "mock"):
        for streamed in (False, True):
            for turns in lengths:
                cell = Cell(backend, streamed, turns)
                timed, found = await _time_cell(cell, pairs)
                problems += [f"{cell.name}: {p}" for p in found]
                overheads = [r - 1 for r in timed.ratios]
                overhead = median(overheads)
                if worst is None or overhead > worst[0]:
                    worst = (overhead, cell.name, timed)
                note = f"{len(timed.ours)} pairs, overhead " + fmt_spread(
                    overheads, lambda v: f"{v * 100:+.1f}%"
                )
                summary = timed.summary()
                row = Row(cell.name, summary["ours_median_s"], summary["anchor_median_s"], "s",
                          note=note)  # fmt: skip
                row.extra["pairs"] = summary
                section.rows.append(row)
                details[cell.name] = {**summary, "overhead_median": overhead}
    section.checks += problems or [
        "every run made N + 1 requests; on the mock every chained request carried one item "
        "(one untimed run per side and cell)"
    ]
    section.notes.append(
        "canned = no-network Model returning ModelResponse objects (CPU cost only); "
        "mock = MockResponsesAPI over an httpx2 MockTransport (HTTP, JSON and SSE parsing "
        "included); overhead = median [p10-p90] of the per-pair ours / SDK - 1"
    )
    assert worst is not None
    cells = pair_cells(worst[2])
    section.target(
        "wrapper overhead ≤ 5% at every run length (timed pairs, worst cell's median)",
        worst[0] <= TARGET and not problems,
        f"worst {worst[0] * 100:+.1f}% ({worst[1]})",
        ours=cells["ours"],
        anchor=cells["anchor"],
        ratio=fmt_spread([r - 1 for r in worst[2].ratios], lambda v: f"{v * 100:+.1f}%")
        + f" ({worst[1]})",
    )
    section.details = details
    return section


def run(
    *, quick: bool = False, lengths: Sequence[int] | None = None, pairs: int | None = None
) -> Section:
    set_tracing_disabled(True)  # no trace export from a benchmark (and none in its smoke test)
    lengths = tuple(lengths or (QUICK_LENGTHS if quick else LENGTHS))
    section = asyncio.run(_run(lengths, pairs or (QUICK_PAIRS if quick else PAIRS), quick))
    _callgrind(section, quick)
    return section


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
