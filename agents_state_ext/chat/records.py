"""What a chat checks and records about its attempts: settings, records, how a run ended."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agents import Agent
from agents.models import get_default_model
from agents.result import RunResultBase

from .._attempts import AttemptDiff, AttemptRecord, explain, part_digest
from .._graph import ConversationGraph
from .._model import RequestTap, tools_digest
from .._nodes import Node
from .._state import ConversationState
from .._tokens import counts_exactly
from ..errors import AttemptNotFoundError
from .rules import PART_PREFIX

if TYPE_CHECKING:
    from .deps import ChatDeps, Turn
    from .plan import Plan
    from .writes import Writes

__all__ = [
    "define_context",
    "explained",
    "invalidated",
    "invalidations",
    "model_name",
    "new_record",
    "note_requests",
    "read_part",
    "reasoning",
    "response_id",
    "start_record",
    "usage",
]


def model_name(agent: Agent[Any] | None) -> str:
    """The model name an agent runs on (its ``Model``'s name, or the SDK default)."""
    model = agent.model if agent is not None else None
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return str(name) if isinstance(name, str) else get_default_model()


def new_record(
    node: Node,
    included: dict[str, int],
    *,
    prompt_version: str | None,
    budget: int | None,
    state_owner: str,
    overflow: bool = False,
    cursor_before: str | None = None,
) -> AttemptRecord:
    """The ``queued`` record of a new attempt ``node`` that sends ``included`` (id -> tokens).

    What the request carries beyond the messages (model, settings, instructions, tools) is
    filled in when it goes out (:func:`note_requests`).
    """
    return AttemptRecord(
        message_id=node.id,
        attempt_id=str(node.attempt_id),
        parent_user_id=node.parent_id,
        request_id=node.request_id,
        prompt_version=prompt_version,
        included=dict(included),
        budget=budget,
        used=sum(included.values()),
        overflow=overflow,
        state_owner=state_owner,
        cursor_before=cursor_before,
        started_at=time.time(),
    )


def start_record(
    deps: ChatDeps,
    book: Writes,
    node: Node,
    included: dict[str, int],
    *,
    overflow: bool = False,
    cursor_before: str | None = None,
) -> AttemptRecord:
    """The record of a new attempt ``node`` of the chat that sends ``included`` (id -> tokens)."""
    record = new_record(
        node,
        included,
        prompt_version=book.prompt_version,
        budget=book.budget,
        state_owner=deps.strategy.name,
        overflow=overflow,
        cursor_before=cursor_before,
    )
    record.exact = counts_exactly(deps.counter)
    return record


def response_id(result: RunResultBase, state: ConversationState) -> str | None:
    """The response a run ended on: the ledger's cursor when the state keeps one."""
    tracker = state.tracker
    if tracker is not None and tracker.previous_response_id is not None:
        return tracker.previous_response_id
    return result.last_response_id


def reasoning(plan: Plan) -> dict[str, int]:
    """A record's ``reasoning``: what ``plan`` did with its history's reasoning items."""
    carried = plan.reasoning
    if not carried.kept and not carried.dropped:
        return {}
    return {"carried": carried.kept, "dropped": carried.dropped}


def usage(result: RunResultBase) -> dict[str, int]:
    """What the run used, summed over its requests."""
    used = result.context_wrapper.usage
    return {
        "requests": used.requests,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "total_tokens": used.total_tokens,
        "reasoning_tokens": used.output_tokens_details.reasoning_tokens,
    }


# -- what crossed the wire ---------------------------------------------------------------------


def note_requests(record: AttemptRecord, tap: RequestTap) -> dict[str, Any]:
    """Fill ``record`` from the first request ``tap`` saw; the parts to keep (digest -> value).

    Nothing is changed when no request went out.
    """
    request = tap.first
    if request is None:
        return {}
    parts: dict[str, Any] = {}
    record.model = request.model
    record.sampling = dict(request.settings)
    record.instructions = None
    if request.instructions is not None:
        record.instructions = part_digest(request.instructions)
        parts[record.instructions] = request.instructions
    record.tools = tools_digest(request)
    if record.tools is not None:
        parts[record.tools] = request.tools
    record.request_digest = request.digest
    record.server_request_id = tap.server_request_id
    return parts


async def define_context(deps: ChatDeps, book: Writes, turn: Turn) -> None:
    """Set the attempt's ``included`` (what the model's context held) and ``sent`` (this request).

    Replay and session send the whole context; so does a new or re-seeded chain and a newly
    forked server conversation (seeded, then sent the rest). A request that continues a chain
    or a server conversation sends only the new turn: its context is the context of the answer
    it continues from, that answer, and what it sent.
    """
    record, plan = turn.record, turn.plan
    sent = deps.strategy.sent(turn)  # None: the request continues the server's context
    if sent is not None:
        record.sent = sent
    else:
        sent = list(record.included)
        anchor = plan.anchor
        base = await _context_before(deps, anchor, book.graph.path_to(turn.user_id))
        tokens = {i: record.included[i] for i in sent}
        record.included = {**base, **tokens}
        record.sent = sent
    record.used = sum(record.included.values())


async def _context_before(
    deps: ChatDeps, anchor: Node | None, path: Sequence[Node]
) -> dict[str, int]:
    """What the server held before the new turn: up to and including ``anchor``."""
    counter = deps.counter
    if anchor is None:  # a server conversation that held only the branch's system messages
        return {n.id: counter.count(n.id, n.items) for n in path if n.role == "system"}
    held: dict[str, int] | None = None
    if anchor.attempt_id is not None:
        try:
            stored = await deps.store.get_attempt(deps.id, anchor.attempt_id)
        except AttemptNotFoundError:
            stored = None
        if stored is not None and stored.sent is not None:
            held = dict(stored.included)
    if held is None:  # a record from before `sent` existed: the branch's completed turns
        held = {}
        for node in path:
            if node.id == anchor.id:
                break
            if node.role != "assistant" or node.status == "complete":
                held[node.id] = counter.count(node.id, node.items)
    held[anchor.id] = counter.count(anchor.id, anchor.items)
    return held


def invalidated(graph: ConversationGraph, edit_id: str) -> list[Node]:
    """The attempts (assistant nodes) the edit that made ``edit_id`` turned invalid."""
    return [
        n
        for n in graph.nodes()
        if n.attempt_id is not None and n.meta.get("invalidated_by") == edit_id
    ]


async def invalidations(
    deps: ChatDeps,
    graph: ConversationGraph,
    turn: Turn,
    queued: Callable[[str], AttemptRecord | None] = lambda attempt_id: None,
) -> list[AttemptRecord]:
    """The stored records of the attempts an edit invalidated, marked with it (when, by which).

    Only for the first attempt that answers an edit (``attempt``'s user message is the edit's
    new version); each record keeps its final status. ``[]`` otherwise. ``queued`` gives the
    handle's own newer version of a record still waiting to be stored (an end whose commit
    failed): that one is marked where it waits, never overwritten by the older stored one.
    """
    edit = graph.get(turn.user_id)
    if "edit_of" not in edit.meta:
        return []
    now = time.time()
    records: list[AttemptRecord] = []
    for node in invalidated(graph, edit.id):
        waiting = queued(str(node.attempt_id))
        if waiting is not None:
            if waiting.invalidated_by is None:
                waiting.invalidated_by, waiting.invalidated_at = edit.id, now
            continue
        try:
            record = await deps.store.get_attempt(deps.id, str(node.attempt_id))
        except AttemptNotFoundError:
            continue
        if record.invalidated_by is None:
            record.invalidated_by, record.invalidated_at = edit.id, now
            records.append(record)
    return records


async def read_part(deps: ChatDeps, digest: str) -> Any:
    """The request part stored under ``digest`` in the chat's metadata (``KeyError`` if none)."""
    meta = (await deps.store.get_conversation(deps.id)).meta
    key = PART_PREFIX + digest
    if key not in meta:
        raise KeyError(f"chat {deps.id} keeps no request part {digest!r}")
    return meta[key]


async def explained(
    deps: ChatDeps, graph: ConversationGraph, a: AttemptRecord, b: AttemptRecord
) -> AttemptDiff:
    """``explain(a, b)`` with the changed texts: the edited prompt, the instructions."""
    diff = explain(a, b)
    texts: dict[str, tuple[Any, Any]] = {}
    if diff.parent_user_id is not None:
        old, new = (_text(graph, i) for i in diff.parent_user_id)
        if old != new:
            texts["prompt"] = (old, new)
    if diff.instructions is not None:
        meta = (await deps.store.get_conversation(deps.id)).meta
        old, new = (meta.get(PART_PREFIX + d) if d else None for d in diff.instructions)
        texts["instructions"] = (old, new)
    return dataclasses.replace(diff, texts=texts) if texts else diff


def _text(graph: ConversationGraph, node_id: str | None) -> str | None:
    if node_id is None or node_id not in graph:
        return None
    return graph.get(node_id).text()
