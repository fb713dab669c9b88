"""Interrupting a scripted run at an exact point: the probe, the run driver and the ways to stop.

A *point* is reached from inside the run itself, never by sleeping: before each model request
(``RunHooks.on_llm_start``), at each SSE frame of an answer in flight (the mock's
``frame_hook``, which runs in the client's task), and inside each tool. The probe numbers the
points as they are reached; a scripted run reaches the same points in the same order every
time, so "the 7th point" of an uninterrupted run is the 7th point of an interrupted one too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, RunHooks, RunState
from agents.exceptions import ModelBehaviorError
from openai import APIConnectionError, APIStatusError, BadRequestError

from agents_state_ext import ConversationState
from agents_state_ext.testing import Fault, MockResponsesAPI, RecordedRequest

__all__ = [
    "STAGED",
    "STREAM_STARTED",
    "TURN_START",
    "WAYS",
    "Held",
    "Point",
    "Probe",
    "ProbeHooks",
    "Runtime",
    "Way",
    "drive",
    "install_frame_points",
    "response_requests",
]

TURN_START = "about to send a model request"
"""The label ending of the point before each model request of the run: a turn starts."""

STREAM_STARTED = "streamed run started, before its task runs"
"""The point right after ``run_streamed()`` returned, in the app's task: nothing sent yet."""

STAGED = "paused, a late user message staged on the approved RunState"
"""The point after the app staged a late message on a paused run, before resuming it."""

LANDING_SECONDS = 2.0
"""How long a point waits for a cancellation it triggered to arrive before giving up."""


class Probe:
    """Numbers the points a run reaches; once armed, fires one action at the target point.

    It also remembers every call whose tool returned an output (``finished``), armed or not.
    """

    def __init__(self) -> None:
        self.finished_calls: set[str] = set()
        self.dead = False
        """The process "died" at a checkpoint: what its tools finish afterwards never happened."""
        self.labels: list[str] = []
        self.recording = False
        self.target: int | None = None
        self.action: Callable[[], Awaitable[None]] | None = None
        self.fired: str | None = None

    def arm(self, target: int | None, action: Callable[[], Awaitable[None]] | None) -> None:
        """Start numbering points; at point ``target`` (if any) run ``action``."""
        self.labels, self.recording = [], True
        self.target, self.action, self.fired = target, action, None

    def disarm(self) -> None:
        """Stop numbering: later runs (continuations, follow-ups) pass every point."""
        self.recording = False

    def finished(self, call_id: str) -> None:
        """A tool returned the output of ``call_id``."""
        if not self.dead:
            self.finished_calls.add(call_id)

    async def reached(self, label: str) -> None:
        """A point: the run is at ``label``."""
        if not self.recording:
            return
        index = len(self.labels)
        self.labels.append(label)
        if index == self.target and self.action is not None:
            self.fired = label
            await self.action()


class ProbeHooks(RunHooks[Any]):
    """Reports "about to send a model request", and each call whose tool returned, to the probe."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def on_llm_start(
        self, context: Any, agent: Agent[Any], system_prompt: str | None, input_items: Any
    ) -> None:
        """Before each model request of the run (not of an ``as_tool`` sub-run)."""
        await self.probe.reached(f"{agent.name}: {TURN_START}")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        """The SDK holds a tool's result: its call has an output."""
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self.probe.finished(call_id)


def response_requests(mock: MockResponsesAPI) -> list[RecordedRequest]:
    """The ``POST /responses`` requests the mock received, in order."""
    return [r for r in mock.requests if r.method == "POST" and r.path == "/responses"]


def install_frame_points(mock: MockResponsesAPI, probe: Probe, first: int) -> None:
    """Make every answer in flight report its frames to ``probe``; requests count from ``first``."""

    async def frame(record: RecordedRequest, sent: int) -> None:
        index = response_requests(mock).index(record) - first
        if not record.streamed:
            await probe.reached(f"req{index} in flight (before its answer)")
        elif sent == 0:
            await probe.reached(f"req{index} before the first event")
        else:
            await probe.reached(f"req{index} after {record.events[sent - 1]} (#{sent})")

    mock.frame_hook = frame


@dataclass(frozen=True)
class Point:
    """Where a run is interrupted: the ``probe``-th point, or a fault on one request."""

    label: str
    probe: int | None = None
    request: int | None = None
    """The fault strikes the ``request``-th model request of the run (from 0)."""
    after_events: int = 0


@dataclass
class Held:
    """What the app holds of the scripted run, and how that run ended."""

    previous: Any
    """The result (or RunState) of the turn before (dumped when there is nothing newer)."""
    result: Any = None
    """The scripted run's newest result (a streamed one as soon as it starts); None if none."""
    finished: bool = False
    """The script reached its final answer."""
    stopped: bool = False
    """The interruption fired: the app stops driving the run."""
    error: BaseException | None = None
    cancelled: bool = False
    crashed: bool = False
    """The process "died" at the point: only ``checkpoint`` survives."""
    before_start: bool = False
    """It died at :data:`STREAM_STARTED`: before the run's first request."""
    checkpoint: str | None = None
    checkpoint_error: Exception | None = None
    """What ``dumps()`` at the point raised instead of writing the checkpoint."""
    refused: str | None = None
    """The SDK refused to resume the run (see ``_continue.SDK_REFUSALS``)."""
    notes: list[str] = field(default_factory=list)
    """Where the harness missed: a point never reached, a fault never used."""
    late: str | None = None
    """The late user message staged on the paused RunState, once staged."""
    staged: RunState[Any] | None = None
    """That RunState (approved, the message staged) until the resumed run hands a result."""
    given: bool = False
    """A run was started on the staged RunState: the library holds the late message."""

    @property
    def resumable(self) -> bool:
        """Whether the app holds an unfinished run of the script that it can resume."""
        return self.result is not None and not self.finished

    def run_state(self) -> RunState[Any]:
        """A RunState of the newest result (or the staged one it was resumed from), to resume."""
        if self.staged is not None:
            return self.staged
        return self.result.to_state()  # type: ignore[no-any-return]

    def dumpable(self) -> Any:
        """What ``state.dumps`` gets: the newest result (or staged RunState), else the turn
        before."""
        if self.staged is not None:
            return self.staged
        return self.result if self.result is not None else self.previous


async def drive(
    state: ConversationState,
    agent: Agent[Any],
    input: Any,
    held: Held,
    *,
    streamed: bool,
    probe: Probe | None = None,
    late: str | None = None,
    **kwargs: Any,
) -> None:
    """Run until the script's final answer, approving every pause, unless interrupted.

    A streamed run is a point (``probe``) as soon as ``run_streamed`` returns: the app may
    cancel it, checkpoint it or die before its task has run at all. With ``late``, the first
    pause also stages that user message on the approved RunState (a point, :data:`STAGED`).
    """
    while True:
        if held.staged is not None and input is held.staged:
            held.given = True
        if streamed:
            result: Any = state.run_streamed(agent, input, **kwargs)
            held.result, held.staged = result, None
            if probe is not None:
                await probe.reached(STREAM_STARTED)
            async for _ in result.stream_events():
                pass
        else:
            result = await state.run(agent, input, **kwargs)
            held.result, held.staged = result, None
        if held.stopped or not result.interruptions:
            held.finished = not result.interruptions and result.final_output is not None
            return
        input = result.to_state()
        for item in result.interruptions:
            input.approve(item)
        if late is not None and held.late is None:
            input.add_input(late)
            held.late, held.staged = late, input
            if probe is not None:
                await probe.reached(STAGED)


@dataclass
class Runtime:
    """The scripted run in flight, as the interruption sees it."""

    state: ConversationState
    held: Held
    task: asyncio.Task[Any] | None = None
    probe: Probe | None = None

    async def cancel_task(self) -> None:
        """``task.cancel()`` of the task driving the run.

        At :data:`STREAM_STARTED` that task has not iterated the stream yet, so cancelling it
        alone would leave the SDK's run task running unobserved (a run the app then resumes
        beside itself); the app's task takes its run with it there, as a dying process does.
        """
        assert self.task is not None
        self.held.stopped = True
        if asyncio.current_task() is self.task and self.held.result is not None:
            self.held.result.cancel()
        self.task.cancel()
        await self._landing()

    async def cancel_result(self) -> None:
        """``result.cancel()`` (immediate) of the streamed run."""
        self.held.stopped = True
        self.held.result.cancel()
        if asyncio.current_task() is self.task:
            return  # at STREAM_STARTED, in the app's task: it drains the cancelled stream next
        await self._landing()

    async def cancel_after_turn(self) -> None:
        """``result.cancel(mode="after_turn")`` of the streamed run."""
        self.held.stopped = True
        self.held.result.cancel(mode="after_turn")

    async def checkpoint_and_crash(self) -> None:
        """``state.dumps(...)`` at the point, then the process dies (its run task is cancelled)."""
        self.held.crashed = True
        self.held.before_start = asyncio.current_task() is self.task
        if self.probe is not None:
            self.probe.dead = True
        try:
            self.held.checkpoint = self.state.dumps(self.held.dumpable())
        except Exception as error:
            self.held.checkpoint_error = error
        await self.cancel_task()

    async def _landing(self) -> None:
        await asyncio.sleep(LANDING_SECONDS)
        self.held.notes.append("the cancellation never reached the point")


@dataclass(frozen=True)
class Way:
    """One way a run ends early: an action at a probe point, or a fault at a request."""

    name: str
    action: Callable[[Runtime], Awaitable[None]] | None = None
    fault: Callable[[int], Fault] | None = None
    """``after_events -> Fault`` for the request the point names."""
    mid_stream: bool = False
    """The fault can strike after any frame of a streamed answer, not only instead of it."""
    streamed_only: bool = False
    per_turn: bool = False
    """Every point of one turn ends the run the same way: only each turn's first is run."""
    in_stream: bool = False
    """The fault takes the place of the answer's terminal event (``response.failed`` or
    ``error`` inside a 200 stream): it strikes after any frame but the last."""
    narrow: bool = False
    """At the CI size, strike only before the first frame and after each output item's done."""
    plain: bool = True
    """The fault means something on a non-streamed request (else such cells are skipped)."""
    in_matrix: bool = True
    """Played at every point by the matrix (else only by the seeded campaign)."""
    strategies: tuple[str, ...] | None = None
    """The strategies whose requests the real API can answer this way (None: all)."""

    def applies_to(self, strategy: str) -> bool:
        """Whether the real API can end a request of ``strategy`` this way."""
        return self.strategies is None or strategy in self.strategies

    @property
    def runs_plain(self) -> bool:
        """Whether this way can end a non-streamed run."""
        return self.plain and not self.streamed_only

    def raised_by_fault(self, error: BaseException) -> bool:
        """Whether ``error`` is what this way's fault makes the client see (never a 400).

        A failure inside a 200 answer (``response.failed``, an ``error`` event, a status-failed
        body) reaches the caller as the SDK's ``ModelBehaviorError``; the rest as openai's.
        """
        if self.fault is None or isinstance(error, BadRequestError):
            return False
        if self.in_stream:
            return isinstance(error, ModelBehaviorError)
        return isinstance(error, (APIStatusError, APIConnectionError))


WAYS: dict[str, Way] = {
    way.name: way
    for way in (
        Way("task_cancel", action=Runtime.cancel_task),
        Way("result_cancel", action=Runtime.cancel_result, streamed_only=True),
        # The SDK reads the after_turn flag only when a turn ends, and the ledger never sees
        # the call: all points of a turn are one case.
        Way("after_turn", action=Runtime.cancel_after_turn, streamed_only=True, per_turn=True),
        Way("checkpoint", action=Runtime.checkpoint_and_crash),
        Way("drop", fault=Fault.drop_mid_stream, mid_stream=True),
        Way(
            "drop_commit",
            fault=lambda k: Fault.drop_mid_stream(k, commit=True),
            mid_stream=True,
        ),
        Way("status_500", fault=lambda _: Fault.status(500)),
        Way("status_500_commit", fault=lambda _: Fault.status(500, commit=True)),
        Way("rate_429", fault=lambda _: Fault.rate_limit()),
        # Inside a 200 stream; a non-streamed request gets the 200 status-failed body (a plain
        # request's 500 is status_500's), and an error event has no non-streamed form.
        Way(
            "response_failed",
            fault=lambda k: Fault.response_failed(k, body=True),
            mid_stream=True,
            in_stream=True,
        ),
        # Only a request on a conversation meets it; the SDK resends it a second later, so the
        # run goes on. That wait at every point is too slow for the matrix: the campaign has it.
        Way(
            "conversation_locked",
            fault=lambda _: Fault.conversation_locked(),
            in_matrix=False,
            strategies=("conversation",),
        ),
        # The SDK turns both terminal events into one error: at the CI size, fewer points here.
        Way(
            "stream_error",
            fault=Fault.stream_error,
            mid_stream=True,
            in_stream=True,
            plain=False,
            narrow=True,
        ),
    )
}
"""Every way a run ends early, by name."""
