"""Replaying a recorded request: the same model, settings, instructions and context again.

:func:`start_replay` plans the new sibling attempt from the record; :class:`Replay` waits for
it and compares its request with the recorded one (:class:`ReplayReport`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agents import Agent, ModelSettings
from agents.models.interface import Model
from pydantic import TypeAdapter

from .._attempts import AttemptDiff, AttemptRecord, explain
from ..errors import GraphError
from .turn import check_idle, start

if TYPE_CHECKING:
    from .attempt import Attempt
    from .deps import ChatDeps, Turn
    from .writes import Writes

__all__ = [
    "Replay",
    "ReplayObstacle",
    "ReplayObstacleKind",
    "ReplayReport",
    "settings_from",
    "start_replay",
]

# -- replaying a recorded request --------------------------------------------------------------

ReplayObstacleKind = Literal[
    "overridden",
    "not_recorded",
    "part_missing",
    "chain_expired",
    "conversation_moved",
    "tools_changed",
    "context_changed",
]
"""Why a replay is not (or may not be) the recorded request byte for byte:

- ``overridden``: the caller changed the model, settings or instructions (the A/B case);
- ``not_recorded``: the record predates request digests, so nothing can be compared;
- ``part_missing``: the recorded instructions are not kept with the chat; the agent's are sent;
- ``chain_expired``: the server no longer knows the response the attempt chained from; the
  replay went out on a new chain seeded from the branch;
- ``conversation_moved``: the server conversation the attempt continued holds more now; the
  replay went out on a new one seeded with the same context;
- ``tools_changed``: the agent's tools differ from the recorded ones (tools are code: a replay
  sends the agent's own);
- ``context_changed``: the messages the context held differ (another budget or count).
"""


@dataclass(frozen=True)
class ReplayObstacle:
    """One reason a replay differs from its recorded request, and what was done instead."""

    kind: ReplayObstacleKind
    detail: str


@dataclass(frozen=True)
class ReplayReport:
    """How a replay went: both records, whether the requests were byte-identical, and why not.

    ``identical``: the rebuilt request's canonical digest equals the recorded one (model,
    settings, instructions, tools, input items, server cursor). ``differences`` is
    ``explain(original, replayed)``; ``obstacles`` say why the request could not be the same.
    """

    original: AttemptRecord
    replayed: AttemptRecord
    identical: bool
    differences: AttemptDiff
    obstacles: tuple[ReplayObstacle, ...] = ()

    def text(self) -> str:
        """A readable account: identical or not, each obstacle, each differing input."""
        head = f"replay of {self.original.attempt_id} as {self.replayed.attempt_id}: "
        head += "identical request" if self.identical else "request differs"
        lines = [head, f"  status: {self.replayed.status}"]
        if self.replayed.error:
            lines.append(f"  error: {self.replayed.error}")
        lines += [f"  {o.kind}: {o.detail}" for o in self.obstacles]
        if not self.identical and self.differences:
            lines += self.differences.text().splitlines()[1:]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


class Replay:
    """A replay in flight: its :attr:`attempt` runs; :meth:`report` waits and compares."""

    def __init__(
        self,
        record: Callable[[str], Awaitable[AttemptRecord]],
        original: AttemptRecord,
        attempt: Attempt,
        obstacles: list[ReplayObstacle],
    ) -> None:
        self._record = record
        self.original = original
        """The record of the attempt replayed."""
        self.attempt = attempt
        """The new sibling attempt (stream it, stop it, await it like any other)."""
        self.obstacles = obstacles
        """What is known before sending to keep the replay from being exact."""

    async def report(self) -> ReplayReport:
        """Wait for the attempt to end and compare its request with the recorded one.

        The attempt's own error is not raised here: it is in ``replayed.error``.
        """
        with contextlib.suppress(Exception):
            await self.attempt
        replayed = await self._record(self.attempt.attempt_id)
        original = self.original
        obstacles = list(self.obstacles)
        if replayed.reseeded_from is not None and original.reseeded_from is None:
            obstacles.append(
                ReplayObstacle(
                    "chain_expired",
                    f"the server no longer knows {replayed.reseeded_from}; sent on a new chain "
                    "seeded from the branch",
                )
            )
        if (
            original.tools is not None or replayed.tools is not None
        ) and original.tools != replayed.tools:
            obstacles.append(ReplayObstacle("tools_changed", "the agent's tool definitions differ"))
        if original.included.keys() != replayed.included.keys() and original.sent is not None:
            obstacles.append(ReplayObstacle("context_changed", "the context held other messages"))
        identical = (
            original.request_digest is not None
            and original.request_digest == replayed.request_digest
        )
        return ReplayReport(
            original=original,
            replayed=replayed,
            identical=identical,
            differences=explain(original, replayed),
            obstacles=tuple(obstacles),
        )


def settings_from(recorded: Mapping[str, Any]) -> ModelSettings:
    """The ``ModelSettings`` a record's ``sampling`` describes (its JSON form, validated)."""
    known = {f.name for f in dataclasses.fields(ModelSettings)}
    data = {k: v for k, v in recorded.items() if k in known}
    return TypeAdapter(ModelSettings).validate_python(data)


def named(model: Any, name: str) -> Any:
    """``model`` sending ``name``: a copy of a ``Model`` with that name, or the name itself."""
    if isinstance(model, Model) and isinstance(getattr(model, "model", None), str):
        renamed = copy.copy(model)
        renamed.model = name  # type: ignore[attr-defined]
        return renamed
    return name


async def start_replay(
    deps: ChatDeps,
    book: Writes,
    agent: Agent[Any] | None,
    original: AttemptRecord,
    *,
    read_part: Callable[[str], Awaitable[Any]],
    model: str | None,
    model_settings: ModelSettings | None,
    instructions: str | None,
    stream: bool,
) -> tuple[Turn, list[ReplayObstacle]]:
    """Plan the replay of ``original`` (see ``Conversation.replay``): its turn, and what keeps
    it from being exact. ``read_part`` reads a request part the chat keeps."""
    assert agent is not None  # checked by the chat
    user_id = original.parent_user_id
    if user_id is None:
        raise GraphError(f"attempt {original.attempt_id} answers no user message")
    obstacles: list[ReplayObstacle] = []
    if original.request_digest is None:
        obstacles.append(
            ReplayObstacle(
                "not_recorded",
                "the record predates request recording: the agent's current request is sent",
            )
        )
    given = {"model": model, "settings": model_settings, "instructions": instructions}
    overrides = [name for name, value in given.items() if value is not None]
    if overrides:
        obstacles.append(ReplayObstacle("overridden", ", ".join(overrides) + " overridden"))
    changes: dict[str, Any] = {}
    if original.request_digest is not None:
        settings = settings_from(original.sampling)
        changes["model_settings"] = settings
        if original.instructions is None:
            changes["instructions"] = None
        else:
            try:
                changes["instructions"] = await read_part(original.instructions)
            except KeyError:
                obstacles.append(
                    ReplayObstacle("part_missing", "the recorded instructions are not kept")
                )
    if model_settings is not None:
        base = changes.get("model_settings", agent.model_settings)
        changes["model_settings"] = base.resolve(model_settings)
    if instructions is not None:
        changes["instructions"] = instructions
    name = model or original.model
    config = deps.runner_kwargs.get("run_config")
    config_model = config.model if config is not None else None
    run_model: Any = None
    if (name is not None and original.request_digest is not None) or model is not None:
        assert name is not None
        if config_model is not None:
            run_model = named(config_model, name)
        else:
            changes["model"] = named(agent.model, name) if agent.model is not None else name
    replay_agent = agent.clone(**changes)
    graph = book.graph
    path = graph.path_to(user_id)
    expected = deps.strategy.cursor(book, path)
    if deps.strategy.moved(original.cursor_before, expected):
        obstacles.append(
            ReplayObstacle(
                "conversation_moved",
                f"server conversation {original.cursor_before} holds more than this branch "
                "now; the replay goes out on one that holds exactly the same context",
            )
        )
    check_idle(deps, book, agent, "replay")
    leaf = graph.active_leaf
    node = graph.retry(user_id)
    turn = start(deps, book, node, stream, leaf=leaf, agent=replay_agent, budget=original.budget)
    turn.record.replay_of = original.attempt_id
    turn.run_overrides = {"model": run_model, "pinned": original.request_digest is not None}
    return turn, obstacles
