"""How the CLI shows graphs, attempt records and requests (rich), and resolves typed ids."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._items import content_text
from .._nodes import Node
from ..chat import PendingApproval
from ..errors import NodeNotFoundError
from ._refs import short_ids

__all__ = [
    "attempt_line",
    "attempts_table",
    "graph_tree",
    "invalidation",
    "make_console",
    "pending_lines",
    "resolve",
    "short",
    "wire_line",
]

_STATUS_STYLE = {
    "complete": "green",
    "cancelled": "yellow",
    "failed": "red",
    "invalid": "dim",
    "queued": "cyan",
    "streaming": "cyan",
    "awaiting_approval": "magenta",
}


def make_console() -> Console:
    """A console for the CLI, no auto-highlighting: ``COLUMNS`` wide when set, else the
    terminal's width, or 120 columns when output is not a terminal."""
    console = Console(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").strip().isdigit():
        console = Console(highlight=False, width=120)
    return console


def short(node_id: str | None) -> str:
    """A readable prefix of a generated id (``msg_1a2b3c4d``); short ids stay whole."""
    if node_id is None:
        return "-"
    return node_id if len(node_id) <= 12 else node_id[:12]


def resolve(ids: Iterable[str], ref: str, what: str = "node") -> str:
    """The one id that is ``ref`` or starts with it; ``NodeNotFoundError`` otherwise."""
    ids = list(ids)
    if ref in ids:
        return ref
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    reason = "is ambiguous" if matches else "matches nothing"
    raise NodeNotFoundError(f"{what} id {ref!r} {reason}")


def _clip(text: str, width: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(node: Node, active: set[str]) -> str:
    style = _STATUS_STYLE.get(node.status, "")
    marker = "[bold]*[/bold]" if node.id in active else " "
    text = escape(_clip(node.text() or _tools(node)))
    extra = ""
    if node.status == "invalid":
        before = node.meta.get("status_before_invalid") or "?"
        by = node.meta.get("invalidated_by")
        edit = f", edited away by {short(by)}" if isinstance(by, str) else ""
        extra = f" [dim](was {escape(str(before))}{edit})[/dim]"
    if node.meta.get("edit_of"):
        extra += f" [dim](edit of {short(node.meta['edit_of'])})[/dim]"
    response = node.meta.get("response_id")
    server = node.meta.get("server_conversation")
    if node.role == "assistant" and (response or server):
        extra += f" [dim]{escape(str(server or ''))} {escape(str(response or ''))}[/dim]"
    return (
        f"{marker}{short(node.id)} {node.role:<9} [{style}]{node.status:<9}[/{style}] "
        f"{text!s}{extra}"
    )


def _tools(node: Node) -> str:
    kinds = [str(i.get("type")) for i in node.items if i.get("type") != "message"]
    return ", ".join(kinds)


def graph_tree(graph: ConversationGraph, title: str) -> Tree:
    """The graph as a tree (``*`` marks the active branch), statuses coloured."""
    active = {n.id for n in graph.active_path()}
    tree = Tree(title)
    stack: list[tuple[Tree, Node]] = []
    roots = [n for n in graph.nodes() if n.parent_id is None]
    stack.extend((tree, n) for n in reversed(roots))
    while stack:
        parent, node = stack.pop()
        branch = parent.add(_label(node, active))
        stack.extend((branch, c) for c in reversed(graph.children(node.id)))
    return tree


def attempts_table(
    records: Sequence[AttemptRecord], title: str | None = None, *, whole_ids: bool = True
) -> Table:
    """Attempt records as a table: what each was sent and what came back.

    The attempt and message ids are never cut (``replay`` and ``/explain`` take them): whole
    (``whole_ids``: output piped to a program), else each one's shortest unique prefix; the
    other columns wrap to fit the console's width.
    """
    attempts = [r.attempt_id for r in records]
    messages = [r.message_id for r in records]
    if whole_ids:
        shown = {i: i for i in attempts + messages}
    else:
        shown = {**short_ids(attempts), **short_ids(messages)}
    table = Table(title=title, show_lines=False, pad_edge=False)
    for column, ids in (("attempt", attempts), ("message", messages)):
        widest = max((len(shown[i]) for i in ids), default=len(column))
        table.add_column(column, no_wrap=True, min_width=max(widest, len(column)))
    for column in ("status", "owner", "model", "budget"):
        table.add_column(column, overflow="fold")
    table.add_column("cursor before → after", overflow="fold")
    table.add_column("response / server request", overflow="fold")
    table.add_column("context: message:tokens (+ sent) = used", overflow="fold")
    for r in records:
        style = _STATUS_STYLE.get(r.status, "")
        budget = "∞" if r.budget is None else str(r.budget)
        if r.overflow:
            budget += " [red]overflow[/red]"
        table.add_row(
            shown[r.attempt_id],
            shown[r.message_id],
            f"[{style}]{r.status}[/{style}]{escape(invalidation(r))}",
            r.state_owner or "-",
            escape(r.model or "-"),
            budget,
            f"{r.cursor_before or '-'} → {r.cursor_after or '-'}",
            f"{r.response_id or '-'} / {r.server_request_id or '-'}",
            escape(f"{_context(r)} = {r.used}"),
        )
    return table


def _context(r: AttemptRecord) -> str:
    """The context's messages, those this request carried marked ``+`` (older records: all)."""
    sent = set(r.sent if r.sent is not None else r.included)
    return " ".join(f"{'+' if i in sent else ''}{short(i)}:{n}" for i, n in r.included.items())


def invalidation(r: AttemptRecord) -> str:
    """`` invalid (edit msg_…, at HH:MM:SS)`` for a record an edit invalidated, else ``""``."""
    if r.invalidated_by is None:
        return ""
    when = ""
    if r.invalidated_at is not None:
        when = ", at " + time.strftime("%H:%M:%S", time.gmtime(r.invalidated_at)) + " UTC"
    return f" · invalid (edit {short(r.invalidated_by)}{when})"


def attempt_line(action: str, r: AttemptRecord) -> str:
    """One line about an attempt: status, what was sent, the budget and the cursor."""
    style = _STATUS_STYLE.get(r.status, "")
    sent = _context(r)
    budget = "∞" if r.budget is None else str(r.budget)
    overflow = " [red]OVERFLOW (not sent)[/red]" if r.overflow else ""
    return (
        f"  [bold]{action:<7}[/bold] {short(r.message_id)} [{style}]{r.status:<9}[/{style}] "
        f"{escape(invalidation(r))}"
        f"context {escape('[' + sent + ']')} {r.used}/{budget} tokens{overflow}  "
        f"cursor {r.cursor_before or '-'} → {r.cursor_after or '-'}"
    )


def wire_line(body: Mapping[str, Any]) -> str:
    """What one ``POST /responses`` body carried: its cursor and input, as ``role:text``."""
    raw = body.get("input")
    items: list[Any] = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
    parts = []
    for item in items:
        if item.get("type", "message") == "message":
            content = content_text(item.get("content"))
            parts.append(f"{item.get('role')}:{_clip(content, 24)!r}")
        else:
            parts.append(f"{item.get('type')}:{item.get('call_id')}")
    prev = body.get("previous_response_id") or "-"
    conv = body.get("conversation") or "-"
    return escape(
        f"    wire: previous_response_id={prev} conversation={conv} input=[{', '.join(parts)}]"
    )


def pending_lines(pending: Sequence[PendingApproval]) -> list[str]:
    """Lines showing the tool calls that wait for a decision, and how to decide them."""
    if not pending:
        return []
    lines = ["[magenta]awaiting approval:[/magenta]"]
    for approval in pending:
        call = f"{approval.tool_name}({approval.arguments})"
        lines.append(escape(f"  {approval.call_id}  {call}  [{approval.decision or 'undecided'}]"))
    hint = (
        "/approve [CALL] or /reject [CALL] [reason] (no CALL: every undecided call); "
        "/stop drops the pending run"
    )
    lines.append(f"[dim]{escape(hint)}[/dim]")
    return lines
