"""``import_session``: an Agents SDK session's items become a chat's linear branch.

The items are cut into turns the way the chat layer stores them: system (or developer)
messages before the first user message are system nodes; each run of user messages is one
user node; everything after it until the next user message (the answer's messages, tool
calls and their outputs, reasoning items, and any system or developer message said between)
is one ``complete`` assistant node, with one ``AttemptRecord`` marked ``imported_from``.

Every id is derived from the source and the items (a chain of digests), so importing the same
session again creates nothing, and importing it after it grew appends only the new turns. A
chat that went on after its import cannot take a session's new turns (they would fork its
history): that is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._attempts import AttemptRecord, part_digest
from ._nodes import Node
from ._tokens import MessageCounter, TokenCounter, counts_exactly
from .errors import ConversationNotFoundError, StoreError
from .stores import ConversationStore
from .stores._token_counts import save_counts

__all__ = ["ImportReport", "import_session", "session_source", "split_turns"]

_CLIENT_OWNED = ("replay", "session")


def session_source(session: Any) -> str:
    """``"<session class>:<session id>"``: what an imported record's ``imported_from`` names."""
    return f"{type(session).__name__}:{session.session_id}"


def _is_user(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def _is_instruction(item: Mapping[str, Any]) -> bool:
    return item.get("role") in ("system", "developer") and item.get("type", "message") == "message"


def split_turns(items: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(role, items)`` per node: leading system messages, then user and assistant nodes.

    ``ValueError`` when something other than a system or developer message comes before the
    first user message: a chat's history starts with what the user said.
    """
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for index, raw in enumerate(items):
        item = copy.deepcopy(dict(raw))
        role = turns[-1][0] if turns else None
        if _is_user(item):
            if role == "user":
                turns[-1][1].append(item)
            else:
                turns.append(("user", [item]))
        elif role in (None, "system") and _is_instruction(item):
            turns.append(("system", [item]))
        elif role in (None, "system"):
            kind = item.get("type", item.get("role"))
            raise ValueError(
                f"session item {index} ({kind}) comes before the first user message; "
                "a chat's history starts with a user message"
            )
        elif role == "user":
            turns.append(("assistant", [item]))
        else:
            turns[-1][1].append(item)
    return turns


def _chain(previous: str, role: str, items: list[dict[str, Any]]) -> str:
    return hashlib.sha256(f"{previous}|{role}|{part_digest(items)}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_session` created (or, with ``dry_run``, would create)."""

    conversation_id: str
    source: str
    """The session, as ``imported_from`` names it."""
    dry_run: bool
    created: bool
    """Whether the chat itself is (or would be) new."""
    items: int
    """Items read from the session."""
    nodes: dict[str, int] = field(default_factory=dict)
    """New messages by role (``system``, ``user``, ``assistant``); empty when nothing is new."""
    attempts: int = 0
    """New attempt records, one per new assistant message."""
    tokens: int = 0
    """Tokens of the new messages, by the counter."""
    exact: bool = True
    """False when ``tokens`` (and the records' counts) are estimates."""
    unanswered: bool = False
    """The session ends with a user message that has no answer (the chat's leaf is that message)."""

    def text(self) -> str:
        """One line per fact, for a person (the CLI prints it)."""
        verb = "would " if self.dry_run else ""
        if not self.nodes and self.created:
            return f"nothing to import: {self.source} holds no items"
        if not self.nodes:
            return f"nothing new: {self.conversation_id} already holds {self.source}"
        what = ", ".join(f"{n} {role}" for role, n in self.nodes.items())
        lines = [
            f"{verb}{'create' if self.created else 'extend'} chat {self.conversation_id} "
            f"from {self.source} ({self.items} session items)",
            f"{verb}add {what} messages and {self.attempts} imported attempt records",
            f"{self.tokens} tokens{'' if self.exact else ' (estimated)'}",
        ]
        if self.unanswered:
            lines.append("the last user message has no answer")
        return "\n".join(lines)


def _nodes_of(turns: list[tuple[str, list[dict[str, Any]]]], source: str, now: float) -> list[Node]:
    nodes: list[Node] = []
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    for role, items in turns:
        digest = _chain(digest, role, items)
        answer = role == "assistant"
        nodes.append(
            Node(
                id=f"msg_imp_{digest}",
                parent_id=nodes[-1].id if nodes else None,
                role=role,  # type: ignore[arg-type]  # one of the three, by split_turns
                status="complete",
                items=items,
                attempt_id=f"att_imp_{digest}" if answer else None,
                request_id=f"req_imp_{digest}" if answer else None,
                created_at=now,
                meta={"imported_from": source},
            )
        )
    return nodes


def _records(
    nodes: list[Node], counts: dict[str, int], *, source: str, strategy: str, exact: bool
) -> list[AttemptRecord]:
    records = []
    for at, node in enumerate(nodes):
        if node.role != "assistant":
            continue
        # What an SDK session sends by default: the whole history before the answer.
        included = {n.id: counts[n.id] for n in nodes[:at]}
        records.append(
            AttemptRecord(
                message_id=node.id,
                attempt_id=str(node.attempt_id),
                parent_user_id=node.parent_id,
                request_id=node.request_id,
                included=included,
                used=sum(included.values()),
                state_owner=strategy,
                status="complete",
                started_at=node.created_at,
                finished_at=node.created_at,
                sent=list(included),
                exact=exact,
                imported_from=source,
            )
        )
    return records


async def _existing(store: ConversationStore, conversation_id: str, source: str) -> set[str] | None:
    """The node ids of the chat already imported from ``source``; None: no such chat."""
    try:
        info = await store.get_conversation(conversation_id)
    except ConversationNotFoundError:
        return None
    if info.meta.get("imported_from") != source:
        raise StoreError(
            f"conversation {conversation_id!r} exists and was not imported from {source}; "
            "import into another conversation_id"
        )
    graph = await store.load_graph(conversation_id)
    return {n.id for n in graph.nodes()}


async def import_session(
    session: Any,
    *,
    store: ConversationStore,
    conversation_id: str | None = None,
    strategy: str = "replay",
    counter: MessageCounter | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Import an SDK ``Session``'s items into a chat of ``store``; what was (or would be) made.

    The chat is ``conversation_id`` (default: an id derived from :func:`session_source`),
    created with ``strategy`` (``replay`` or ``session``: an imported history is the app's)
    when absent. Each message is counted with ``counter`` (default: ``TokenCounter("gpt-4.1")``)
    and the counts are stored with the chat when the store keeps them. Importing again
    creates nothing; after the session grew, only its new turns. ``dry_run`` reads and counts
    but writes nothing. A chat at ``conversation_id`` that was not imported from this session,
    or that went on after its import while the session did too, is ``StoreError``;
    ``ValueError`` for session items that do not start with a user (or system) message, and
    for a session whose ``session_settings.limit`` would hide the start of its history.
    """
    if strategy not in _CLIENT_OWNED:
        raise ValueError(
            f"an imported chat owns its history: strategy must be replay or session, "
            f"not {strategy!r}"
        )
    source = session_source(session)
    limit = getattr(getattr(session, "session_settings", None), "limit", None)
    if limit is not None:
        raise ValueError(
            f"{source} reads only its last {limit} items (session_settings.limit): open it "
            "without a limit to import its whole history"
        )
    items = await session.get_items()
    turns = split_turns(items)
    counter = counter if counter is not None else TokenCounter("gpt-4.1")
    target = conversation_id or "chat_imp_" + hashlib.sha256(source.encode()).hexdigest()[:24]
    planned = _nodes_of(turns, source, time.time())
    known = await _existing(store, target, source)
    new = [n for n in planned if known is None or n.id not in known]
    head = new[0].parent_id if new else None
    if new and known is not None and head != await store.get_head(target):
        raise StoreError(
            f"conversation {target!r} went on after its import from {source}; the "
            "session's new turns would fork it: import them into another conversation_id"
        )
    counts = {n.id: counter.count(n.id, n.items) for n in planned}
    exact = counts_exactly(counter)
    fresh = {n.id for n in new}
    records = [
        r
        for r in _records(planned, counts, source=source, strategy=strategy, exact=exact)
        if r.message_id in fresh
    ]
    by_role: dict[str, int] = {}
    for node in new:
        by_role[node.role] = by_role.get(node.role, 0) + 1
    report = ImportReport(
        conversation_id=target,
        source=source,
        dry_run=dry_run,
        created=known is None,
        items=len(items),
        nodes=by_role,
        attempts=len(records),
        tokens=sum(counts[n.id] for n in new),
        exact=exact,
        unanswered=bool(planned) and planned[-1].role == "user",
    )
    if dry_run or not new:
        return report
    if known is None:
        meta = {"budget": None, "prompt_version": None, "imported_from": source}
        await store.create_conversation(target, strategy=strategy, meta=meta)
    try:
        await store.commit(
            target, new, expected_head=head, new_head=planned[-1].id, attempts=records
        )
        await save_counts(store, target, counter, new)
    except BaseException:
        if known is None:  # nothing half-imported: a new chat goes again
            with contextlib.suppress(Exception):
                await store.delete_conversation(target)
        raise
    return report
