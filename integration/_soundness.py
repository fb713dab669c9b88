"""The one verdict of the interruption suite: is a conversation's server-side transcript sound?

Sound means: every user input exactly once and in order, every function call exactly once
with exactly one output, no output without its call, every assistant answer once and under
its own turn, and no error the mock answered that the test did not inject.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents_state_ext import INTERRUPTED_TOOL_OUTPUT
from agents_state_ext.testing import RecordedRequest

from ._scripts import answer, user_tag

__all__ = [
    "Problem",
    "UnsoundTranscript",
    "assert_transcript_sound",
    "generic",
    "raised",
    "transcript_problems",
]

_IDS = re.compile(r"\b(?:call|resp|fco|fc|msg|conv)_[\w.-]+|\b[wxlf]-\d[\w.-]*")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a conversation: ``kind`` groups, ``detail`` names the items."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def generic(text: str) -> str:
    """``text`` with ids and turn tags replaced, so equal failures group together."""
    return _IDS.sub("<id>", text)


def raised(where: str, error: BaseException, context: str = "") -> Problem:
    """An exception nothing injected, e.g. ``raised("follow-up raised", error)``."""
    message = str(error).splitlines()[0] if str(error) else ""
    detail = f"{context}: {message}" if context else message
    return Problem(f"{where} {type(error).__name__}: {generic(message)}", detail)


def transcript_problems(
    items: Sequence[Mapping[str, Any]],
    users: Sequence[str],
    requests: Iterable[RecordedRequest] = (),
    finished: Collection[str] = (),
) -> list[Problem]:
    """Everything duplicated, lost, orphaned or misfiled in ``items``, and every uninjected
    error status in ``requests``; ``users`` are the user texts sent, in order, and
    ``finished`` the call ids whose tool returned an output (it must not be lost)."""
    return [
        *_user_problems(items, users),
        *_tool_problems(items, finished),
        *_answer_problems(items),
        *_error_statuses(requests),
    ]


class UnsoundTranscript(AssertionError):
    """A transcript with problems; ``problems`` lists them for reports that group them."""

    def __init__(self, cell: str, problems: list[Problem]) -> None:
        super().__init__(f"{cell}: " + "; ".join(str(p) for p in problems))
        self.problems = problems


def assert_transcript_sound(
    cell: str,
    items: Sequence[Mapping[str, Any]],
    users: Sequence[str],
    requests: Iterable[RecordedRequest] = (),
    finished: Collection[str] = (),
) -> None:
    """Raise :class:`UnsoundTranscript` naming ``cell`` and every problem found.

    ``items`` is the server-side transcript, ``users`` the user texts sent in order,
    ``requests`` the mock's request log (any error status nothing injected is a problem) and
    ``finished`` the call ids whose tool returned (closing one as interrupted loses it).
    """
    problems = transcript_problems(items, users, requests, finished)
    if problems:
        raise UnsoundTranscript(cell, problems)


def _messages(items: Sequence[Mapping[str, Any]], role: str) -> list[str]:
    return [
        user_tag(item)
        for item in items
        if item.get("type", "message") == "message" and item.get("role") == role
    ]


def _user_problems(items: Sequence[Mapping[str, Any]], users: Sequence[str]) -> list[Problem]:
    expected = [user.casefold() for user in users]
    seen = _messages(items, "user")
    counts = Counter(seen)
    problems = [Problem("user input lost", u) for u in expected if counts[u] == 0]
    problems += [_twice("user input duplicated", u, counts[u]) for u in expected if counts[u] > 1]
    problems += [Problem("phantom user message", u) for u in counts if u not in expected]
    present = [u for u in seen if u in expected]
    if not problems and present != [u for u in expected if u in present]:
        problems.append(Problem("user inputs out of order", " < ".join(present)))
    return problems


def _tool_problems(items: Sequence[Mapping[str, Any]], finished: Collection[str]) -> list[Problem]:
    calls = Counter(str(i.get("call_id")) for i in items if i.get("type") == "function_call")
    outputs = Counter(
        str(i.get("call_id")) for i in items if i.get("type") == "function_call_output"
    )
    problems = [_twice("function call duplicated", c, n) for c, n in calls.items() if n > 1]
    problems += [Problem("function call without output", c) for c in calls if not outputs[c]]
    problems += [_twice("tool output duplicated", c, n) for c, n in outputs.items() if n > 1]
    problems += [Problem("tool output without its call", c) for c in outputs if not calls[c]]
    closed = {
        str(i.get("call_id"))
        for i in items
        if i.get("type") == "function_call_output" and i.get("output") == INTERRUPTED_TOOL_OUTPUT
    }
    problems += [
        Problem("tool output lost", f"{c} closed as interrupted though its tool returned")
        for c in sorted(closed.intersection(finished))
    ]
    return problems


def _answer_problems(items: Sequence[Mapping[str, Any]]) -> list[Problem]:
    problems: list[Problem] = []
    turn = ""
    answers: Counter[str] = Counter()
    for item in items:
        if item.get("type", "message") != "message":
            continue
        text = user_tag(item)
        if item.get("role") == "user":
            turn = text
        elif item.get("role") == "assistant":
            answers[text] += 1
            if text != answer(turn):
                problems.append(Problem("answer filed under the wrong turn", f"{text!r} in {turn}"))
    problems += [_twice("answer duplicated", a, n) for a, n in answers.items() if n > 1]
    return problems


def _twice(kind: str, what: str, times: int) -> Problem:
    return Problem(kind, f"{what!r} {times} times")


def _error_statuses(requests: Iterable[RecordedRequest]) -> list[Problem]:
    problems: list[Problem] = []
    for record in requests:
        injected = record.fault is not None and record.fault.kind != "delay"
        if record.status is not None and record.status >= 400 and not injected:
            kind = f"HTTP {record.status} {generic(record.error or '')}".strip()
            problems.append(Problem(kind, f"{record.method} {record.path}: {record.error}"))
    return problems
