"""``export_session``: a chat's active branch written into an Agents SDK session, in order.

What goes is what the chat's own history is made of: its system messages, its user messages
and its ``complete`` answers (tool calls, outputs and reasoning items included, as stored);
a cancelled, failed, queued or paused attempt on the branch is left out. A session that
already holds a beginning of those items gets only the rest, so exporting twice adds
nothing; one holding anything else is refused before anything is added. Items are compared
by what they say (role and text, call id, name, arguments, output), not by their ids, since
a server session (``OpenAIConversationsSession``) gives the items it stores ids of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._attempts import part_digest
from ._session_import import session_source
from .errors import StoreError
from .stores import ConversationStore

__all__ = ["ExportReport", "export_session", "item_fingerprint"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        str(p.get("text", p.get("refusal", ""))) for p in parts if isinstance(p, Mapping)
    )


def _output(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def item_fingerprint(item: Mapping[str, Any]) -> str:
    """What an item says, without the ids and statuses a store may add or change."""
    kind = item.get("type", "message")
    if kind == "message":
        said: Any = [item.get("role"), _text(item.get("content"))]
    elif kind == "function_call":
        said = [item.get("call_id"), item.get("name"), item.get("arguments")]
    elif kind == "function_call_output":
        said = [item.get("call_id"), _output(item.get("output"))]
    elif kind == "reasoning":
        said = [_text(item.get("summary"))]
    else:
        said = {k: v for k, v in item.items() if k not in ("id", "status")}
    return part_digest([kind, said])


@dataclass(frozen=True)
class ExportReport:
    """What :func:`export_session` added to the session (or, with ``dry_run``, would add)."""

    conversation_id: str
    target: str
    """The session, as ``"<session class>:<session id>"``."""
    dry_run: bool
    added: int
    """Items added (or that would be)."""
    already: int
    """Items of the branch the session held already."""
    skipped: int
    """Unfinished or failed attempts on the branch, left out."""

    def text(self) -> str:
        """One line for a person (the CLI prints it)."""
        if not self.added:
            return f"nothing new: {self.target} already holds {self.conversation_id}"
        verb = "would add" if self.dry_run else "added"
        note = f", {self.skipped} unfinished attempts left out" if self.skipped else ""
        return (
            f"{verb} {self.added} items of {self.conversation_id} to {self.target} "
            f"({self.already} already there{note})"
        )


async def export_session(
    store: ConversationStore, conversation_id: str, session: Any, *, dry_run: bool = False
) -> ExportReport:
    """Add chat ``conversation_id``'s active branch to the SDK ``session``; what was added.

    Exporting again adds nothing (only what the branch gained since). ``StoreError`` when the
    session already holds items that are not the beginning of the branch; nothing is added.
    """
    path = await store.active_path(conversation_id)
    items: list[dict[str, Any]] = []
    skipped = 0
    for node in path:
        if node.role == "assistant" and node.status != "complete":
            skipped += 1
            continue
        items += [copy.deepcopy(item) for item in node.items]
    held = await session.get_items()
    target = session_source(session)
    ours = [item_fingerprint(item) for item in items]
    theirs = [item_fingerprint(item) for item in held]
    if ours[: len(theirs)] != theirs:
        raise StoreError(
            f"{target} holds {len(theirs)} items that are not the beginning of "
            f"{conversation_id}'s active branch; export into an empty session"
        )
    new = items[len(theirs) :]
    if new and not dry_run:
        await session.add_items(new)
    return ExportReport(
        conversation_id=conversation_id,
        target=target,
        dry_run=dry_run,
        added=len(new),
        already=len(theirs),
        skipped=skipped,
    )
