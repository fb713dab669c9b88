"""The slash commands of ``agents-state-ext chat``; each bad argument is one error line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import click
from agents import ModelSettings
from rich.console import Console
from rich.markup import escape

from ..chat import Attempt, Conversation, check_budget
from ..errors import ContextOverflowError, InvalidTargetError
from ._refs import describe_error, pick, reference, status_text
from .render import attempt_line, attempts_table, graph_tree, pending_lines, short

__all__ = ["COMMANDS_HELP", "Commands", "parse_budget", "replay_options"]

COMMANDS_HELP = """\
  <text>          send a message (the answer streams)
  /stop           stop the streaming answer (or press Ctrl-C); its partial text is kept;
                  with tool calls awaiting approval, drop that pending run
  /approve [CALL] approve a pending tool call (no CALL: every undecided one); the answer
                  goes on once every call is decided
  /reject [CALL] [reason]  reject one (the model is told the reason), as /approve
  /retry          answer the active user message again
  /edit REF [text]  replace user message REF (text: the rest of the line, else next line)
  /path           the active branch, numbered
  /branches       every branch (its leaf), numbered, the active one starred
  /switch N|REF   make branch N of /branches (or message REF) the active leaf
  /budget N       token budget of each request (a positive integer, or off)
  /explain A B    what differed in what attempts A and B were sent
  /replay A [model=NAME] [temperature=T] [top_p=P] [switch]  send attempt A's recorded
                  request again as a new sibling (optionally overridden) and say whether it
                  was identical; the active branch stays where it was unless `switch` is given
  REF             a message id or a unique prefix of one (msg_1a2b...), or its number on /path
                  (/switch: a plain number is a branch of /branches instead)
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
            self.say("[dim](empty message: nothing sent)[/dim]")
            return True
        if not text.startswith("/"):
            await self._send(text)
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
            node = await self.chat.switch(self._branch_or_ref(_one(rest, "/switch N|REF")))
            self.say(f"active leaf: {short(node.id)} ({node.role}, {status_text(node)})")
            if node.status == "invalid":
                self.say(f"[yellow]note:[/yellow] {_EDITED_AWAY}")
        elif name == "/budget":
            await self.chat.set_budget(parse_budget(_one(rest, "/budget N")))
            self.say(f"budget: {self.chat.budget or '∞'} tokens")
        elif name == "/explain":
            refs = rest.split()
            if len(refs) != 2:
                raise click.UsageError("usage: /explain A B (two attempts: REF or attempt id)")
            ids = self._ids() + [r.attempt_id for r in await self.chat.attempts()]
            path = self.chat.active_path()
            first, second = (reference(ref, path, ids, what="attempt") for ref in refs)
            self.say(escape((await self.chat.explain(first, second)).text()))
        elif name == "/replay":
            await self._replay(rest)
        elif name == "/tree":
            self.console.print(graph_tree(self.chat.graph, f"chat {self.chat.id}"))
        elif name == "/attempts":
            records = await self.chat.attempts()
            self.console.print(attempts_table(records, whole_ids=not self.console.is_terminal))
        else:
            raise click.UsageError(f"unknown command {name}; /help lists them")
        return True

    async def _answer(self, attempt: Attempt) -> None:
        await self.stream(attempt)
        record = await self.chat.record(attempt.id)
        if isinstance(attempt.error, ContextOverflowError):  # a re-seeded chain over the budget
            raise attempt.error
        self.say(f"[dim]{attempt_line('·', record)}[/dim]")
        if record.error:
            error = describe_error(attempt.error) or record.error
            self.say(f"[red]error:[/red] {escape(error)}")
        if attempt.status == "awaiting_approval":
            for line in pending_lines(await self.chat.pending_approvals()):
                self.say(line)

    async def _replay(self, rest: str) -> None:
        words = rest.split()
        if not words:
            raise click.UsageError(_REPLAY_USAGE)
        ref, options = words[0], words[1:]
        move = "switch" in options
        options = [o for o in options if o != "switch"]
        ids = self._ids() + [r.attempt_id for r in await self.chat.attempts()]
        target = reference(ref, self.chat.active_path(), ids, what="attempt")
        model, settings = replay_options(options)
        before = self.chat.graph.active_leaf
        replay = await self.chat.replay(target, model=model, model_settings=settings, stream=True)
        await self.stream(replay.attempt)
        report = await replay.report()
        self.say(escape(report.text()))
        answer = report.replayed.message_id
        waits = replay.attempt.status == "awaiting_approval"  # its tool calls need its branch
        if before is not None and not move and not waits:
            if self.chat.graph.active_leaf != before:
                await self.chat.switch(before)
            self.say(
                f"[dim]the active branch stays on {short(before)}; /switch {short(answer)} "
                "(or /replay A switch) moves onto the replay[/dim]"
            )
            return
        if self.chat.graph.active_leaf != answer:
            await self.chat.switch(answer)
        why = " (its tool calls await approval)" if waits and not move else ""
        self.say(f"[dim]now on the replay: active leaf {short(answer)}{why}[/dim]")

    async def _decide(self, name: str, rest: str) -> None:
        pending = await self.chat.pending_approvals()
        if not pending:
            raise click.UsageError("no tool call awaits approval")
        ref, _, reason = rest.partition(" ")
        call_id = pick([a.call_id for a in pending], ref, "tool call") if ref else None
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

    async def _send(self, text: str) -> None:
        await self._answer(self.chat.send(text, stream=True))

    async def _edit(self, rest: str) -> None:
        ref, _, content = rest.partition(" ")
        if not ref:
            raise click.UsageError("usage: /edit REF [text] (a message id, prefix or /path number)")
        node = self.chat.node(self._ref(ref))
        if node.role != "user":
            article = "an" if node.role[:1] in "aeiou" else "a"
            raise InvalidTargetError(
                f"message {ref} is {article} {node.role} message, not a user one"
            )
        if not content.strip():
            self.say("new text: ")
            content = (await self.read_line()) or ""
        if not content.strip():
            raise click.UsageError("the edited message is empty")
        await self._answer(self.chat.edit(node.id, content.strip(), stream=True))

    def _path(self) -> None:
        for number, node in enumerate(self.chat.active_path(), 1):
            text = " ".join(node.text().split())[:60]
            status = status_text(node)
            self.say(escape(f"  [{number}] {short(node.id)} {node.role:<9} {status:<9} {text}"))

    def _branches(self) -> None:
        graph, active = self.chat.graph, self.chat.graph.active_leaf
        for number, leaf_id in enumerate(graph.branches(), 1):
            path = graph.path_to(leaf_id)
            users = [n for n in path if n.role == "user"]
            leaf = path[-1]
            star = "*" if leaf_id == active else " "
            asked = " ".join(users[-1].text().split())[:40] if users else ""
            self.say(
                f" {star}{number}. {short(leaf_id)} {leaf.role} {status_text(leaf)} "
                f"({len(path)} messages) last question: {escape(asked)!r}"
            )

    def _branch_or_ref(self, ref: str) -> str:
        """``/switch``'s argument: a number of ``/branches`` (its leaf), else a message ref."""
        if ref.isdigit():
            branches = self.chat.graph.branches()
            number = int(ref)
            if not 1 <= number <= len(branches):
                raise InvalidTargetError(
                    f"there is no branch {number} (/branches numbers them 1 to {len(branches)})"
                )
            return branches[number - 1]
        return self._ref(ref)

    def _ids(self) -> list[str]:
        return [n.id for n in self.chat.graph.nodes()]

    def _ref(self, ref: str) -> str:
        """The message ``ref`` names: an id, a unique prefix, or its number on ``/path``."""
        return reference(ref, self.chat.active_path(), self._ids())


_EDITED_AWAY = (
    "this version was edited away: its messages stay marked invalid, and the next message "
    "continues it (its complete turns are sent as context again on this branch)"
)


_REPLAY_USAGE = "usage: /replay A [model=NAME] [temperature=T] [top_p=P] [max_tokens=N] [switch]"


def parse_budget(raw: str | None) -> int | None:
    """A ``--budget`` / ``/budget`` value: a positive integer (``off`` / ``none``: unbounded)."""
    if raw is None or raw.strip().lower() in ("off", "none"):
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise click.BadParameter(f"the budget must be a positive integer, got {raw!r}") from None
    try:
        return check_budget(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def replay_options(options: list[str]) -> tuple[str | None, ModelSettings | None]:
    """``model=NAME`` and sampling overrides (``temperature=0.2``) of a replay."""
    model: str | None = None
    numbers: dict[str, float | int] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not value:
            raise click.UsageError(_REPLAY_USAGE)
        if key == "model":
            model = value
        elif key in ("temperature", "top_p"):
            numbers[key] = _number(key, value, float)
        elif key == "max_tokens":
            numbers[key] = _number(key, value, int)
        else:
            raise click.UsageError(f"unknown replay option {key!r}; {_REPLAY_USAGE}")
    return model, ModelSettings(**numbers) if numbers else None  # type: ignore[arg-type]


def _number(key: str, value: str, kind: type[float] | type[int]) -> float | int:
    try:
        return kind(value)
    except ValueError:
        raise click.UsageError(f"{key} must be a number, got {value!r}") from None


def _one(rest: str, usage: str) -> str:
    if not rest or len(rest.split()) != 1:
        raise click.UsageError(f"usage: {usage}")
    return rest
