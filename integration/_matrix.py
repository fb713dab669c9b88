"""The interruption matrix: enumerate a scripted run's points, then interrupt it at each one.

A *cell* is (script, strategy, streamed, way, continuation, point). Each cell runs on a fresh
conversation: a warm-up turn ``w-N``, the scripted run ``x-N`` interrupted at the point, the
continuation, and a follow-up turn ``f-N`` that must succeed; then the server-side transcript
is judged by :func:`~._soundness.transcript_problems`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agents import RunState

from agents_state_ext.testing import MockResponsesAPI

from ._continue import CellSkipped, Continuation
from ._interrupt import STAGED, TURN_START, Held, Point, Way, response_requests
from ._scripts import Script, answer, user_tag
from ._soundness import (
    Problem,
    UnsoundTranscript,
    assert_transcript_sound,
    raised,
    transcript_problems,
)
from ._talk import Talk

__all__ = ["Cell", "Outcome", "enumerate_points", "run_point"]

_SEQUENCE = itertools.count(1)
_POINTS: dict[tuple[str, str, bool, str], list[Point]] = {}


@dataclass(frozen=True)
class Cell:
    """Everything about an interruption except its point."""

    script: Script
    strategy: str
    streamed: bool
    way: Way
    continuation: Continuation

    @property
    def name(self) -> str:
        """``script/strategy/plain|streamed/way/continuation``."""
        mode = "streamed" if self.streamed else "plain"
        parts = (self.script.name, self.strategy, mode, self.way.name, self.continuation.name)
        return "/".join(parts)

    def skip_reason(self) -> str | None:
        """Why this combination means nothing (None: it is run)."""
        if self.way.streamed_only and not self.streamed:
            return f"{self.way.name}: result.cancel() exists only on a streamed result"
        if not self.way.plain and not self.streamed:
            return (
                f"{self.way.name}: an error event exists only in a stream (a non-streamed "
                "request that fails gets an error status: status_500 covers it)"
            )
        if self.way.name == "checkpoint" and not self.continuation.loads:
            return "a checkpoint is restored into a fresh state; same-process runs are other ways"
        if self.script.late_input and not hasattr(RunState, "add_input"):
            return "RunState.add_input, which stages the late message, is new in openai-agents 0.24"
        if self.script.late_input and not FULL and not _late_cell(self.way, self.continuation):
            return (
                "at the CI size the late-input script plays its checkpoint cells: a failed "
                "request or a checkpoint, then resume or loads() and resume, and a checkpoint or "
                "a task cancel then a new turn (STATE_EXT_MATRIX_FULL=1 plays every cell)"
            )
        if self.continuation.resume and not self.streamed and not self.script.pauses:
            return (
                "a plain run cut short returns no result, so the app holds no RunState to resume "
                "(only a pause for approval hands one over): the new-turn cells cover its points"
            )
        return None

    def open(self, mock: MockResponsesAPI) -> tuple[Talk, tuple[str, str, str]]:
        """A fresh conversation for one point, and its turn tags (warm-up, script, follow-up)."""
        script = self.script
        talk = Talk.open(
            mock,
            self.strategy,
            streamed=self.streamed,
            responder=script.responder,
            agent=script.agent,
            run_kwargs=script.run_kwargs(),
        )
        n = next(_SEQUENCE)
        if script.late_input:
            talk.late = f"l-{n}"
        return talk, (f"w-{n}", f"x-{n}", f"f-{n}")


@dataclass
class Outcome:
    """One cell's verdict: its problems, or why it was skipped."""

    point: Point
    problems: list[Problem] = field(default_factory=list)
    skipped: str | None = None


async def enumerate_points(mock: MockResponsesAPI, cell: Cell) -> list[Point]:
    """Every point where ``cell.way`` can strike, from one uninterrupted run (cached)."""
    way = cell.way
    mid = way.mid_stream and cell.streamed
    kind = f"probe{way.per_turn}" if way.fault is None else f"{mid}-{way.in_stream}"
    key = (cell.script.name, cell.strategy, cell.streamed, kind)
    if key not in _POINTS:
        _POINTS[key] = await _uninterrupted_points(mock, cell)
    return _POINTS[key]


async def _uninterrupted_points(mock: MockResponsesAPI, cell: Cell) -> list[Point]:
    talk, (warm, script_input, _) = cell.open(mock)
    held = Held(previous=await talk.turn(talk.state, warm))
    first = len(response_requests(mock))
    await talk.interrupted(script_input, held, None, Point("uninterrupted"))
    if not held.finished:
        raise AssertionError(f"{cell.name}: the uninterrupted script did not finish")
    labels = talk.probe.labels
    if cell.way.fault is None:
        points = [Point(label, probe=i) for i, label in enumerate(labels)]
        if cell.way.per_turn:
            points = [p for p in points if p.label.endswith(TURN_START)]
    else:
        points = list(_request_points(cell, [r.events for r in response_requests(mock)[first:]]))
    if cell.script.late_input and not FULL:
        # Before the message is staged the run is the approval script's, whose cells cover it.
        staged = labels.index(STAGED)
        sent = sum(1 for label in labels[:staged] if label.endswith(TURN_START))
        points = [
            p
            for p in points
            if (p.probe is not None and p.probe >= staged)
            or (p.request is not None and p.request >= sent)
        ]
    return points


def _request_points(cell: Cell, events: list[list[str]]) -> Iterator[Point]:
    way = cell.way
    for index, sent in enumerate(events):
        if not (way.mid_stream and cell.streamed):
            yield Point(f"req{index} instead of its answer", request=index)
            continue
        yield Point(f"req{index} before the first event", request=index)
        # An in-stream failure replaces the terminal event: after the last frame it cannot come.
        frames = sent[:-1] if way.in_stream else sent
        for k, event in enumerate(frames, start=1):
            if not FULL and not _sampled(frames, k, narrow=way.narrow):
                continue
            yield Point(f"req{index} after {event} (#{k})", request=index, after_events=k)


FULL = os.environ.get("STATE_EXT_MATRIX_FULL") == "1"
"""Every frame of every answer for the mid-stream ways (else a sample, see ``_sampled``), and
every cell of the late-input script (else its checkpoint cells, see ``_late_cell``)."""

_LATE_FAULTS = ("status_500", "drop", "response_failed", "status_500_commit", "drop_commit")


def _late_cell(way: Way, continuation: Continuation) -> bool:
    """Whether a cell of the late-input script is played at the CI size.

    Its checkpoint cells (issue 29 item 4): a request carrying the staged message fails, or
    the app checkpoints, then the RunState is resumed in the same process or through
    ``loads()``. And a checkpoint or a task cancel then a new turn, where the staged message
    must still go out once (the ledger holds what the run never sent).
    """
    if continuation.resume:
        return way.name in _LATE_FAULTS or way.name == "checkpoint"
    return not continuation.store and way.name in ("checkpoint", "task_cancel")


_TEXT_DELTA = "response.output_text.delta"


def _sampled(frames: list[str], k: int, *, narrow: bool) -> bool:
    """Whether a mid-stream fault (a drop, an in-stream failure) after frame ``k`` runs at CI size.

    Kept: after every output item's ``done`` (what the client holds changes there); unless
    ``narrow``, also after ``response.created`` (the response has an id), after the first delta
    of a message's text (a partial answer) and after the last frame. The frames in between
    hold the same; ``STATE_EXT_MATRIX_FULL=1`` runs them all.
    """
    event = frames[k - 1]
    if event == "response.output_item.done":
        return True
    if narrow:
        return False
    if k == len(frames) or event == "response.created":
        return True
    return event == _TEXT_DELTA and (k == 1 or frames[k - 2] != _TEXT_DELTA)


async def run_point(mock: MockResponsesAPI, cell: Cell, point: Point) -> Outcome:
    """Run one cell: warm-up, the interrupted script, the continuation, a follow-up; judge."""
    talk, tags = cell.open(mock)
    if cell.continuation.store:
        await talk.hold()
    try:
        return await _judge(mock, cell, point, talk, tags)
    finally:
        await talk.close()


async def _judge(
    mock: MockResponsesAPI, cell: Cell, point: Point, talk: Talk, tags: tuple[str, str, str]
) -> Outcome:
    warm, script_input, follow_up = tags
    held = Held(previous=await talk.turn(talk.state, warm))
    await talk.interrupted(script_input, held, cell.way, point)
    outcome = Outcome(point, [Problem("harness", note) for note in held.notes])
    if held.checkpoint_error is not None:
        outcome.problems.append(raised("dumps() at the point raised", held.checkpoint_error))
    try:
        state = await cell.continuation.run(talk, held)
    except CellSkipped as skip:
        return Outcome(point, skipped=str(skip))
    except Exception as error:
        outcome.problems.append(raised("continuation raised", error))
        state = talk.state
    try:
        final = await talk.turn(state, follow_up)
    except Exception as error:
        outcome.problems.append(raised("follow-up raised", error))
        outcome.problems += transcript_problems([], [], mock.requests)
        return outcome
    if final.final_output != answer(follow_up):
        outcome.problems.append(Problem("follow-up answered", repr(final.final_output)))
    try:
        items = talk.transcript(final)
        users = _users(cell, held, tags, mock)
        assert_transcript_sound(cell.name, items, users, mock.requests, talk.probe.finished_calls)
    except UnsoundTranscript as unsound:
        outcome.problems += unsound.problems
    return outcome


def _users(cell: Cell, held: Held, tags: tuple[str, str, str], mock: MockResponsesAPI) -> list[str]:
    """The user messages the conversation must hold, in order: the late one if it counts."""
    warm, script_input, follow_up = tags
    late = held.late if held.late is not None and _late_counts(cell, held, mock) else None
    return [warm, script_input, *([late] if late else []), follow_up]


def _late_counts(cell: Cell, held: Held, mock: MockResponsesAPI) -> bool:
    """Whether a staged late message reached the library, so it must reach the server once.

    It did when a run was started on the RunState holding it, or when the app resumes that
    RunState (from its checkpoint too); not when the app left it before running it. A store
    holds the ledger as saved at requests: after a crash, only a message some request carried.
    """
    if cell.continuation.store and held.crashed:
        return any(held.late in _user_tags(r.json) for r in response_requests(mock))
    return held.given or cell.continuation.resume


def _user_tags(body: Any) -> list[str]:
    raw = body.get("input") if isinstance(body, dict) else None
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    return [user_tag(i) for i in items if isinstance(i, dict) and i.get("role") == "user"]
