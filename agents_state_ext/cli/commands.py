"""The slash commands of ``agents-state-ext chat``; each bad argument is one error line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import click
from rich.console import Console
from rich.markup import escape

from ..chat import Attempt, Conversation
from ..errors import ContextOverflowError, InvalidTargetError
from .render import attempt_line, attempts_table, graph_tree, pending_lines, resolve, short

__all__ = ["COMMANDS_HELP", "Commands"]

COMMANDS_HELP = """\
  <text>          send a message (the answer streams)
  /stop           stop the streaming answer (or press Ctrl-C); its partial text is kept;
                  with tool calls awaiting approval, drop that pending run
  /approve [CALL] approve a pending tool call (no CALL: every undecided one); the answer
                  goes on once every call is decided
  /reject [CALL] [reason]  reject one (the model is told the reason), as /approve
  /retry          answer the active user message again
  /edit N [text]  replace user message N of /path (text: the rest of the line, else next line)
  /path           the active branch, numbered
  /branches       every branch (its leaf), the active one starred
  /switch ID      make message ID (or a unique prefix) the active leaf
  /budget N       token budget of each request (a positive integer, or off)
  /explain A B    what differed in what attempts A and B were sent (ids or prefixes)
  /tree           the whole graph;  /attempts  the attempt records
  /help           this list;  /quit  leave (so does end of input)"""


class Commands:
    """Runs one REPL line against a chat; ``run`` returns ``False`` to leave."""

    def __init__(
        self,
        console: Console,
        chat: Conversation,
        stream: Callable[[Attempt], Awaitable[None]],
        read_line: Callable[[], Awaitable[str | None]],
    ) -> None:
        self.console, self.chat, self.stream, self.read_line = console, chat, stream, read_line

    def say(self, text: str) -> None:
        self.console.print(text, soft_wrap=True)

    async def run(self, line: str) -> bool:
        text = line.strip()
        if not text:
            return True
        if not text.startswith("/"):
            await self._answer(self.chat.send(text, stream=True))
            return True
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.say(escape(COMMANDS_HELP))
        elif name == "/stop":
            stopped = await self.chat.stop()  # only a pending approval is left to stop here
            if stopped is None:
                self.say("nothing is streaming or awaiting approval")
            else:
                record = await self.chat.record(stopped.id)
                self.say(f"[dim]{attempt_line('stopped', record)}[/dim]")
        elif name in ("/approve", "/reject"):
            await self._decide(name, rest)
        elif name == "/retry":
            await self._answer(self.chat.retry(stream=True))
        elif name == "/edit":
            await self._edit(rest)
        elif name == "/path":
            self._path()
        elif name == "/branches":
            self._branches()
        elif name == "/switch":
            node = await self.chat.switch(resolve(self._ids(), _one(rest, "/switch ID")))
            self.say(f"active leaf: {short(node.id)} ({node.role}, {node.status})")
        elif name == "/budget":
            from .chat import parse_budget

            await self.chat.set_budget(parse_budget(_one(rest, "/budget N")))
            self.say(f"budget: {self.chat.budget or '∞'} tokens")
        elif name == "/explain":
            refs = rest.split()
            if len(refs) != 2:
                raise click.UsageError("usage: /explain A B (two attempt or message ids)")
            ids = self._ids() + [r.attempt_id for r in await self.chat.attempts()]
            first, second = (resolve(ids, ref, "attempt") for ref in refs)
            self.say(escape((await self.chat.explain(first, second)).text()))
        elif name == "/tree":
            self.console.print(graph_tree(self.chat.graph, f"chat {self.chat.id}"))
        elif name == "/attempts":
            self.console.print(attempts_table(await self.chat.attempts()))
        else:
            raise click.UsageError(f"unknown command {name}; /help lists them")
        return True

    async def _answer(self, attempt: Attempt) -> None:
        await self.stream(attempt)
        record = await self.chat.record(attempt.id)
        if record.overflow and record.status == "failed":  # refused: nothing was sent
            raise ContextOverflowError(record.error or "the request is over the token budget")
        self.say(f"[dim]{attempt_line('·', record)}[/dim]")
        if record.error:
            self.say(f"[red]error:[/red] {escape(record.error)}")
        if attempt.status == "awaiting_approval":
            for line in pending_lines(await self.chat.pending_approvals()):
                self.say(line)

    async def _decide(self, name: str, rest: str) -> None:
        pending = await self.chat.pending_approvals()
        if not pending:
            raise click.UsageError("no tool call awaits approval")
        ref, _, reason = rest.partition(" ")
        call_id = resolve([a.call_id for a in pending], ref, "tool call") if ref else None
        if name == "/approve":
            if reason.strip():
                raise click.UsageError("usage: /approve [CALL]")
            decided = await self.chat.approve(call_id)
        else:
            decided = await self.chat.reject(call_id, message=reason.strip() or None)
        for approval in decided:
            self.say(escape(f"  {approval.call_id} {approval.tool_name}: {approval.decision}"))
        if all(a.decision is not None for a in decided):
            await self._answer(self.chat.resume(stream=True))

    async def _edit(self, rest: str) -> None:
        number, _, content = rest.partition(" ")
        path = self.chat.active_path()
        if not number.isdigit() or not 1 <= int(number) <= len(path):
            raise click.UsageError(f"usage: /edit N [text], N between 1 and {len(path)} (/path)")
        node = path[int(number) - 1]
        if node.role != "user":
            raise InvalidTargetError(f"message {number} is a {node.role} message, not a user one")
        if not content.strip():
            self.say("new text: ")
            content = (await self.read_line()) or ""
        if not content.strip():
            raise click.UsageError("the edited message is empty")
        await self._answer(self.chat.edit(node.id, content.strip(), stream=True))

    def _path(self) -> None:
        for number, node in enumerate(self.chat.active_path(), 1):
            text = " ".join(node.text().split())[:60]
            self.say(
                escape(f"  [{number}] {short(node.id)} {node.role:<9} {node.status:<9} {text}")
            )

    def _branches(self) -> None:
        graph, active = self.chat.graph, self.chat.graph.active_leaf
        for number, leaf_id in enumerate(graph.branches(), 1):
            path = graph.path_to(leaf_id)
            users = [n for n in path if n.role == "user"]
            leaf = path[-1]
            star = "*" if leaf_id == active else " "
            asked = " ".join(users[-1].text().split())[:40] if users else ""
            self.say(
                f" {star}{number}. {short(leaf_id)} {leaf.role} {leaf.status} "
                f"({len(path)} messages) last question: {escape(asked)!r}"
            )

    def _ids(self) -> list[str]:
        return [n.id for n in self.chat.graph.nodes()]


def _one(rest: str, usage: str) -> str:
    if not rest or len(rest.split()) != 1:
        raise click.UsageError(f"usage: {usage}")
    return rest
