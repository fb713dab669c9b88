"""The record kept for every model attempt, so two outputs for one user message can be explained."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["AttemptDiff", "AttemptRecord", "Change", "explain"]


@dataclass
class AttemptRecord:
    """Everything that decided what one assistant attempt was sent and what came back.

    ``included`` maps each message id put into the request to its token count, in the order
    sent. ``sampling`` is the model settings actually sent (temperature, top_p, seed, ...).
    ``cursor_before`` / ``cursor_after`` are the server cursor (``previous_response_id`` or
    ``conversation_id``) used by and produced by the attempt; ``None`` under client ownership.
    ``reseeded_from`` is the ``previous_response_id`` the server had lost when the attempt was
    sent again on a new chain seeded from the branch (``None``: it was not). ``status`` is
    ``queued`` while in flight, ``awaiting_approval`` while tool calls wait for a person, then
    ``complete``, ``cancelled`` or ``failed``; ``approvals`` lists those calls (``call_id``,
    ``tool_name``, ``arguments``, ``agent``) with the ``decision`` taken on each
    (``approved``, ``rejected`` or ``None``) and its ``message``. Times are Unix seconds.
    Records stored before a field existed load with its default.
    """

    message_id: str
    attempt_id: str
    parent_user_id: str | None = None
    request_id: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    included: dict[str, int] = field(default_factory=dict)
    budget: int | None = None
    used: int | None = None
    overflow: bool = False
    state_owner: str | None = None
    cursor_before: str | None = None
    cursor_after: str | None = None
    reseeded_from: str | None = None
    response_id: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    status: str = "queued"
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of this record."""
        return copy.deepcopy(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptRecord:
        """Rebuild a record from :meth:`to_dict`; unknown keys are ignored, missing ones default."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k in known})


Change = tuple[Any, Any]
"""A value in the first attempt and the value in the second."""

_SCALARS = (
    "parent_user_id",
    "model",
    "prompt_version",
    "budget",
    "used",
    "overflow",
    "state_owner",
    "cursor_before",
    "cursor_after",
)


@dataclass(frozen=True)
class AttemptDiff:
    """What differed in what two attempts were sent; false when nothing did.

    Each scalar field is ``(first, second)`` when the two differ, else ``None``. ``sampling``
    holds only the keys whose values differ, a key absent from one side reading as ``None``.
    ``added`` / ``removed`` are the messages only the second / only the first included, with
    their counts; ``retokenized`` those both included with different counts. Outputs
    (response id, usage, status) are not compared: they are what the diff explains.
    """

    first: str
    second: str
    parent_user_id: Change | None = None
    model: Change | None = None
    prompt_version: Change | None = None
    sampling: dict[str, Change] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    retokenized: dict[str, Change] = field(default_factory=dict)
    budget: Change | None = None
    used: Change | None = None
    overflow: Change | None = None
    state_owner: Change | None = None
    cursor_before: Change | None = None
    cursor_after: Change | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self) if f.name not in ("first", "second"))

    def text(self) -> str:
        """A readable, line-per-difference account of this diff."""
        lines = [f"attempt {self.first} -> {self.second}:"]
        for name in _SCALARS:
            change = getattr(self, name)
            if change is not None:
                lines.append(f"  {name}: {change[0]!r} -> {change[1]!r}")
        lines += [f"  sampling.{k}: {a!r} -> {b!r}" for k, (a, b) in self.sampling.items()]
        lines += [f"  + message {i} ({n} tokens)" for i, n in self.added.items()]
        lines += [f"  - message {i} ({n} tokens)" for i, n in self.removed.items()]
        lines += [f"  ~ message {i}: {a} -> {b} tokens" for i, (a, b) in self.retokenized.items()]
        if len(lines) == 1:
            lines.append("  nothing sent differed")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def explain(a: AttemptRecord, b: AttemptRecord) -> AttemptDiff:
    """What differed between what attempt ``a`` and attempt ``b`` were sent."""
    scalars: dict[str, Change] = {}
    for name in _SCALARS:
        old, new = getattr(a, name), getattr(b, name)
        if old != new:
            scalars[name] = (old, new)
    sampling = {
        key: (a.sampling.get(key), b.sampling.get(key))
        for key in sorted(a.sampling.keys() | b.sampling.keys())
        if a.sampling.get(key) != b.sampling.get(key)
    }
    return AttemptDiff(
        first=a.attempt_id,
        second=b.attempt_id,
        sampling=sampling,
        added={i: n for i, n in b.included.items() if i not in a.included},
        removed={i: n for i, n in a.included.items() if i not in b.included},
        retokenized={
            i: (n, b.included[i])
            for i, n in a.included.items()
            if i in b.included and b.included[i] != n
        },
        **scalars,
    )
