"""The fault campaign: seeded random conversations with several interruptions each.

A *plan* is drawn from ``random.Random(seed)`` alone: a strategy, whether a rewriting input
filter runs, and a few steps, each a new turn of a random script, streamed or not, maybe cut
short by a random way at a random point, then continued a random way (resume or new turn, in
the same process or through ``dumps`` / ``loads``). After the last step a clean follow-up turn
must succeed and the transcript must be sound. A failing seed is replayed exactly by
``STATE_EXT_CAMPAIGN_SEED=<seed> python -m pytest -m campaign -s``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents_state_ext.testing import MockResponsesAPI

from ._continue import CONTINUATIONS, CellSkipped
from ._interrupt import WAYS, Held, Point
from ._scripts import SCRIPTS, answer, build_agent, responder_by_tag
from ._soundness import (
    Problem,
    UnsoundTranscript,
    assert_transcript_sound,
    raised,
    transcript_problems,
)
from ._talk import STRATEGIES, Talk

__all__ = ["Plan", "Tally", "Verdict", "draw", "run_plan"]

TURN_SCRIPTS = ("text", "tool", "parallel", "approval", "handoff", "as_tool", "reasoning")
_CATEGORIES = (
    ("duplicates", ("duplicated",)),
    ("losses", ("lost",)),
    ("orphan calls", ("without output", "without its call", "No tool output", "No tool call")),
    ("400s", ("HTTP 400",)),
    ("unexpected exceptions", ("raised",)),
)


@dataclass(frozen=True)
class Step:
    """One new turn, maybe interrupted, and how the conversation goes on after it."""

    script: str
    streamed: bool
    way: str | None
    point: Point
    then: str

    def __str__(self) -> str:
        mode = "streamed" if self.streamed else "plain"
        cut = f"{self.way} at {self.point.label}" if self.way else "uninterrupted"
        return f"{self.script} ({mode}), {cut}, then {self.then}"


@dataclass(frozen=True)
class Plan:
    """One random conversation, fully determined by its seed."""

    seed: int
    strategy: str
    filtered: bool
    steps: tuple[Step, ...]
    stored: bool = False
    """The ledger is held in a store from the start; workers take it over from there."""

    def __str__(self) -> str:
        head = f"seed {self.seed}: {self.strategy}{', filtered' if self.filtered else ''}"
        head += ", ledger in a store" if self.stored else ""
        return "\n".join([head, *(f"  {n}. {step}" for n, step in enumerate(self.steps))])


def draw(seed: int) -> Plan:
    """The plan of ``seed``."""
    rng = random.Random(seed)
    strategy = rng.choice(STRATEGIES)
    filtered = rng.random() < 0.25
    stored = rng.random() < 0.5
    steps = tuple(_step(rng, stored, strategy) for _ in range(rng.randint(2, 4)))
    return Plan(seed, strategy, filtered, steps, stored)


def _step(rng: random.Random, stored: bool, strategy: str) -> Step:
    # An app that keeps its ledger in a store goes on in the same worker or in another one
    # from the store; one that does not, in the same process or through dumps / loads.
    same = ["resume", "new_turn"]
    thens = [*same, "store_takeover"] if stored else [*same, "loads_resume", "loads_new_turn"]
    script = rng.choice(TURN_SCRIPTS)
    streamed = rng.random() < 0.5
    ways = [
        name
        for name, way in WAYS.items()
        if (streamed or way.runs_plain) and way.applies_to(strategy)
    ]
    way_name = rng.choice(ways) if rng.random() < 0.75 else None
    then = rng.choice(thens)
    way = WAYS.get(way_name or "")
    if way is None:
        return Step(script, streamed, None, Point("-"), then)
    if way.action is not None:
        probe = rng.randrange(16)
        if way.name == "checkpoint":  # the process died: only what it saved goes on
            then = "store_takeover" if stored else rng.choice(["loads_resume", "loads_new_turn"])
        return Step(script, streamed, way.name, Point(f"point #{probe}", probe=probe), then)
    request = rng.randrange(3)
    # 14: past the last frame of a short answer (a text message streams 11 frames).
    after = rng.randrange(14) if way.mid_stream and streamed else 0
    label = f"req{request}" + (f" after {after} events" if after else "")
    return Step(script, streamed, way.name, Point(label, request=request, after_events=after), then)


@dataclass
class Verdict:
    """What one plan did: the interruptions that struck, and every problem found."""

    plan: Plan
    struck: Counter[str] = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)


async def run_plan(mock: MockResponsesAPI, plan: Plan) -> Verdict:
    """Play ``plan`` on a fresh conversation and judge its transcript."""
    verdict = Verdict(plan)
    scripts = [SCRIPTS[name] for name in TURN_SCRIPTS]
    kwargs = SCRIPTS["filter"].run_kwargs() if plan.filtered else {}
    talk = Talk.open(
        mock,
        plan.strategy,
        streamed=False,
        responder=responder_by_tag,
        agent=lambda api, reporter: build_agent(api, reporter, scripts),
        run_kwargs=kwargs,
    )
    if plan.stored:
        await talk.hold()
    try:
        return await _judge(mock, plan, talk, verdict)
    finally:
        await talk.close()


async def _judge(mock: MockResponsesAPI, plan: Plan, talk: Talk, verdict: Verdict) -> Verdict:
    users = [f"w-{plan.seed}"]
    last: Any = await talk.turn(talk.state, users[0])
    for n, step in enumerate(plan.steps):
        users.append(f"x-{plan.seed}-{n}.{step.script}")
        last = await _play(talk, step, users[-1], last, verdict)
    users.append(f"f-{plan.seed}")
    try:
        final = await talk.turn(talk.state, users[-1])
    except Exception as error:
        verdict.problems.append(raised("follow-up raised", error))
        verdict.problems += transcript_problems([], [], mock.requests)
        return verdict
    if final.final_output != answer(users[-1]):
        verdict.problems.append(Problem("follow-up answered", repr(final.final_output)))
    try:
        items, finished = talk.transcript(final), talk.probe.finished_calls
        assert_transcript_sound(f"seed {plan.seed}", items, users, mock.requests, finished)
    except UnsoundTranscript as unsound:
        verdict.problems += unsound.problems
    return verdict


async def _play(talk: Talk, step: Step, text: str, last: Any, verdict: Verdict) -> Any:
    """One step: the turn, its interruption, then its continuation; the newest result."""
    talk.streamed = step.streamed
    held = Held(previous=last)
    way = WAYS.get(step.way or "")
    await talk.interrupted(text, held, way, step.point)
    if way is not None and not held.notes:
        verdict.struck[way.name] += 1
    if held.checkpoint_error is not None:
        verdict.problems.append(raised("dumps() at the point raised", held.checkpoint_error, text))
    if held.error is not None and not _injected(held.error, step):
        verdict.problems.append(raised("step raised", held.error, text))
    try:
        talk.state = await CONTINUATIONS[step.then].run(talk, held)
    except CellSkipped:
        pass  # nothing to resume: the next turn goes on from the same state
    except Exception as error:
        verdict.problems.append(raised(f"{step.then} raised", error, text))
    return held.dumpable()


def _injected(error: BaseException, step: Step) -> bool:
    """Whether ``error`` is what the step's fault makes the client see."""
    way = WAYS.get(step.way or "")
    return way is not None and way.raised_by_fault(error)


@dataclass
class Tally:
    """Counts over a campaign, and the plans that failed."""

    sequences: int = 0
    struck: Counter[str] = field(default_factory=Counter)
    categories: Counter[str] = field(default_factory=Counter)
    failed: list[Verdict] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        """Count one plan."""
        self.sequences += 1
        self.struck.update(verdict.struck)
        for problem in verdict.problems:
            self.categories.update(_categories(problem))
        if verdict.problems:
            self.failed.append(verdict)

    def summary(self) -> str:
        """Counts: sequences, interruptions by kind, problems by category."""
        struck = ", ".join(f"{kind} {n}" for kind, n in sorted(self.struck.items()))
        found = ", ".join(f"{name} {self.categories[name]}" for name, _ in _CATEGORIES)
        return (
            f"campaign: {self.sequences} sequences, {len(self.failed)} failed\n"
            f"  interruptions that struck: {struck}\n"
            f"  problems: {found}, other {self.categories['other']}"
        )

    def failures(self, limit: int = 10) -> str:
        """The first ``limit`` failing plans with their problems, and how to replay one."""
        lines: list[str] = []
        for verdict in self.failed[:limit]:
            lines.append(str(verdict.plan))
            lines += [f"    ! {problem}" for problem in _unique(verdict.problems)]
        if self.failed:
            seed = self.failed[0].plan.seed
            lines.append(f"replay: STATE_EXT_CAMPAIGN_SEED={seed} python -m pytest -m campaign -s")
        return "\n".join(lines)


def _categories(problem: Problem) -> list[str]:
    """The summary's categories ``problem`` counts in (a 400 for an orphan call: two)."""
    names = [name for name, needles in _CATEGORIES if any(n in problem.kind for n in needles)]
    return names or ["other"]


def _unique(problems: Sequence[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
