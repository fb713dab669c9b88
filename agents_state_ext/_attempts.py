"""The record kept for every model attempt, so two outputs for one user message can be explained.

An :class:`AttemptRecord` says what one attempt *sent* (the effective request: model, full
model settings, digests of the instructions and tool definitions, the messages its context
held and those this request carried, the server cursor used, the request ids) and what came
back. :func:`explain` compares the inputs of two records; :func:`request_digest` and
:func:`part_digest` are the canonical digests both the record and a replay use.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, get_args

from ._items import jsonable
from .errors import RecordError
from .types import AttemptStatus

__all__ = [
    "AttemptDiff",
    "AttemptRecord",
    "Change",
    "explain",
    "part_digest",
    "request_digest",
]


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=jsonable
    ).encode("utf-8")


def part_digest(value: Any) -> str:
    """The stable digest (``sha256:<hex>``) of a request part: instructions text or tool list.

    The same value always has the same digest, whatever the process or the key order.
    """
    return "sha256:" + hashlib.sha256(_canonical(value)).hexdigest()


def request_digest(request: dict[str, Any]) -> str:
    """The digest of a whole request in its canonical form (see ``AttemptRecord.request_digest``).

    ``request`` holds ``model``, ``settings``, ``instructions``, ``tools``, ``input``,
    ``previous_response_id``, ``conversation_id`` (and ``output_schema`` / ``prompt`` when
    set); two requests with the same digest carried the same bytes of content.
    """
    return part_digest(request)


@dataclass
class AttemptRecord:
    """Everything that decided what one assistant attempt was sent and what came back.

    What was sent is taken from the request as it went out (its first model call), not from
    the agent: ``model`` and ``sampling`` (the full effective model settings, after
    ``RunConfig`` overrides and defaults, non-scalars included, without the request-id
    header), ``instructions`` and ``tools`` (digests of the system instructions and of the tool
    definitions sent; the full text is kept once per distinct value with the chat, see
    ``Conversation.request_part``), ``request_digest`` (the digest of the whole request,
    :func:`request_digest`). Until a request goes out they are empty (an attempt refused
    before sending has none).

    ``included`` maps each message id the model's context held for this request to its token
    count, in order, under every strategy: the messages sent with the request plus those the
    server already held (the chain or server conversation it continued). ``sent`` lists the
    ids this request itself carried. ``cursor_before`` is the server cursor
    (``previous_response_id`` or ``conversation_id``) used, ``cursor_after`` the one produced;
    ``None`` under client ownership. ``reseeded_from`` is the ``previous_response_id`` the
    server had lost when the attempt was sent again on a new chain seeded from the branch.

    ``request_id`` is the attempt's id for its request, sent as the ``X-Client-Request-Id``
    header; ``server_request_id`` is the ``x-request-id`` the server answered with.
    ``replay_of`` is the attempt this one replays (``Conversation.replay``). ``trace_id`` is
    the id of the SDK trace the attempt ran in (``None`` with tracing off). ``reasoning``
    says what the request did with the reasoning items of the history it sent itself
    (``carried``: sent inline with their encrypted content; ``dropped``: left out, their
    items sent without ids); empty when it sent none. ``usage`` holds
    ``reasoning_tokens`` too (the answer's ``output_tokens_details``).

    ``status`` is ``queued`` while in flight, ``awaiting_approval`` while tool calls wait for
    a person, then ``complete``, ``cancelled`` or ``failed`` — kept after an edit made the
    attempt ``invalid``: ``invalidated_by`` (the edit's new user message) and
    ``invalidated_at`` say when and by which edit. ``approvals`` lists the calls that waited
    (``call_id``, ``tool_name``, ``arguments``, ``agent``) with the ``decision`` taken on each
    and its ``message``. Times are Unix seconds. Records stored before a field existed load
    with its default.

    ``exact`` is false when the token counts in ``included`` and ``used`` are estimates (the
    chat's counter had no encoding for the model; see ``TokenCounter``'s ``estimate``).
    ``imported_from`` names the SDK session an imported answer came from
    (``"SQLiteSession:<session_id>"``, see :func:`~agents_state_ext.import_session`): such a
    record describes no request this library sent, so it has no model settings or digests.
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
    status: AttemptStatus = "queued"
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    sent: list[str] | None = None
    instructions: str | None = None
    tools: str | None = None
    request_digest: str | None = None
    server_request_id: str | None = None
    invalidated_by: str | None = None
    invalidated_at: float | None = None
    replay_of: str | None = None
    trace_id: str | None = None
    reasoning: dict[str, int] = field(default_factory=dict)
    exact: bool = True
    imported_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of this record."""
        return copy.deepcopy(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptRecord:
        """Rebuild a record from :meth:`to_dict`; unknown keys are ignored, missing ones default.

        A field of the wrong type (or a missing id) raises ``RecordError``.
        """
        if not isinstance(data, Mapping):
            raise RecordError(f"an attempt record is an object, got {type(data).__name__}")
        known = {f.name: f.type for f in fields(cls)}
        for name in ("message_id", "attempt_id"):
            if name not in data:
                raise RecordError(f"an attempt record needs {name!r}")
        for name, value in data.items():
            kind = known.get(name)
            if kind is not None and not _fits(value, str(kind)):
                raise RecordError(
                    f"attempt record field {name!r}: {kind} expected, got {value!r:.60}"
                )
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k in known})


def _fits(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the annotated type ``kind`` (the field types of AttemptRecord)."""
    if value is None:
        return kind.endswith("| None")
    base = kind.removesuffix(" | None")
    if base == "str":
        return isinstance(value, str)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "bool":
        return isinstance(value, bool)
    if base == "AttemptStatus":
        return value in get_args(AttemptStatus)
    if base == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if base == "list[dict[str, Any]]":
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    if base in ("dict[str, int]",):
        return isinstance(value, dict) and all(
            isinstance(k, str) and _fits(v, "int") for k, v in value.items()
        )
    if base == "dict[str, Any]":
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    raise AssertionError(f"AttemptRecord field type {kind} has no check")  # pragma: no cover


Change = tuple[Any, Any]
"""A value in the first attempt and the value in the second."""

_SCALARS = (
    "parent_user_id",
    "model",
    "prompt_version",
    "instructions",
    "tools",
    "budget",
    "used",
    "overflow",
    "state_owner",
    "cursor_before",
)


@dataclass(frozen=True)
class AttemptDiff:
    """What differed in what two attempts were sent; false when the requests were identical.

    Only inputs are compared. Each scalar field is ``(first, second)`` when the two differ,
    else ``None`` (``instructions`` / ``tools`` compare digests). ``sampling`` holds only the
    settings whose values differ, a key absent from one side reading as ``None``. ``added`` /
    ``removed`` are the messages only the second / only the first had in its context, with
    their counts; ``retokenized`` those both had with different counts. ``texts`` holds the
    changed text behind a difference when the caller knows it (``Conversation.explain`` fills
    ``prompt`` for an edit pair and ``instructions`` from the stored parts). Outputs (response
    id, cursor after, usage, status) are not compared: they are what the diff explains.
    """

    first: str
    second: str
    parent_user_id: Change | None = None
    model: Change | None = None
    prompt_version: Change | None = None
    instructions: Change | None = None
    tools: Change | None = None
    sampling: dict[str, Change] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    retokenized: dict[str, Change] = field(default_factory=dict)
    budget: Change | None = None
    used: Change | None = None
    overflow: Change | None = None
    state_owner: Change | None = None
    cursor_before: Change | None = None
    texts: dict[str, Change] = field(default_factory=dict)

    def __bool__(self) -> bool:
        skip = ("first", "second", "texts")
        return any(getattr(self, f.name) for f in fields(self) if f.name not in skip)

    @property
    def inputs(self) -> list[str]:
        """The names of the inputs that differed (``context`` for the message ids)."""
        names = [name for name in _SCALARS if getattr(self, name) is not None]
        names += [f"sampling.{key}" for key in self.sampling]
        if self.added or self.removed or self.retokenized:
            names.append("context")
        return names

    def text(self) -> str:
        """A readable, line-per-difference account of this diff."""
        lines = [f"attempt {self.first} -> {self.second}:"]
        for name in _SCALARS:
            change = getattr(self, name)
            if change is not None:
                lines.append(f"  {name}: {change[0]!r} -> {change[1]!r}")
                if name in self.texts:
                    old, new = self.texts[name]
                    lines += [f"    - {old!r}", f"    + {new!r}"]
        if "prompt" in self.texts and self.parent_user_id is not None:
            old, new = self.texts["prompt"]
            lines += [f"  prompt: {old!r} -> {new!r}"]
        lines += [f"  sampling.{k}: {a!r} -> {b!r}" for k, (a, b) in self.sampling.items()]
        lines += [f"  + message {i} ({n} tokens)" for i, n in self.added.items()]
        lines += [f"  - message {i} ({n} tokens)" for i, n in self.removed.items()]
        lines += [f"  ~ message {i}: {a} -> {b} tokens" for i, (a, b) in self.retokenized.items()]
        if len(lines) == 1:
            lines.append("  identical request: nothing sent differed")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def explain(a: AttemptRecord, b: AttemptRecord) -> AttemptDiff:
    """What differed between the requests attempts ``a`` and ``b`` sent (inputs only)."""
    scalars: dict[str, Any] = {}
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
