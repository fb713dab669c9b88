"""``agents-state-ext chat``: an interactive chat that streams, stops, retries, edits, branches.

With ``OPENAI_API_KEY`` set it talks to the real OpenAI API; otherwise (or with
``--offline``) to the built-in mock, which streams a slow echo so ``/stop`` has time to act,
and answers ``delete <path>`` with a call of a (pretend) ``delete_file`` tool that needs
approval: the chat shows the pending call and waits for ``/approve`` or ``/reject``.
``--agent module:attr`` chats with your own agent instead (offline: on the mock model).
Tracing stays as the SDK has it against the real API; the offline mock turns it off.

On a terminal the prompt edits lines and keeps this session's history (readline), a dim
indicator waits for an answer's first text, and what is typed while an answer streams is
not echoed: ``/stop`` then stops it (so does Ctrl-C); any other line typed meanwhile waits
its turn. Ctrl-C or Ctrl-D at the prompt leaves. From a pipe, lines are read on a thread.
What the SDK logs while an answer streams is shown after it, on its own lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import click
from agents import Agent, OpenAIResponsesModel, function_tool, set_tracing_disabled
from rich.console import Console
from rich.markup import escape

from .._agent_spec import agent_option, bind_model, cli_agent
from ..chat import STRATEGIES, Attempt, Conversation, check_budget, open_conversation
from ..errors import StateExtError
from ..stores import InMemoryStore, SQLiteStore
from ._prompt import LineSource, PipeLines, open_lines
from ._refs import describe_error
from .commands import COMMANDS_HELP, Commands
from .render import make_console, pending_lines

if TYPE_CHECKING:
    from ..testing import Reply, ResponseContext

__all__ = ["chat", "chat_agent", "parse_budget", "sdk_logs_held"]


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


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (offline demo: nothing is deleted; a person must approve each call)."""
    return f"(pretend) deleted {path}"


def _offline_reply(context: ResponseContext) -> Reply:
    from ..testing import Reply

    last = context.items[-1] if context.items else {}
    said = context.last_user_text or ""
    if last.get("type") == "function_call_output":
        text = f"(offline mock) The tool answered: {last.get('output')}"
    elif said.startswith("delete ") and said[7:].strip():
        return Reply.tool_call("delete_file", {"path": said[7:].strip()})
    else:
        text = f"(offline mock) You said: {said}. Set OPENAI_API_KEY to talk to a real model."
    words = text.split(" ")
    chunks = [w + " " for w in words[:-1]] + [words[-1]]
    return Reply.text(text, chunks=chunks, delay=0.03)


@contextlib.asynccontextmanager
async def chat_agent(
    offline: bool, model: str, spec: str | None
) -> AsyncIterator[tuple[Agent[Any], Any, str]]:
    """The agent (``--agent`` or the built-in one), its client and what it talks to."""
    own = cli_agent(spec) if spec is not None else None
    if offline:
        from ..testing import MockResponsesAPI  # the kit loads only for the offline model

        async with MockResponsesAPI(model=model) as mock:
            mock.responder = _offline_reply
            client = mock.client()
            responses = OpenAIResponsesModel(model=model, openai_client=client)
            if own is not None:  # offline, the user's agent (tools, instructions) on the mock
                agent = own.clone(model=responses)
            else:
                agent = Agent(name="assistant", model=responses, tools=[delete_file])
            yield agent, client, "offline mock"
        return
    from openai import AsyncOpenAI

    client = AsyncOpenAI()
    if own is not None:
        agent = bind_model(own, model, client)
    else:
        responses = OpenAIResponsesModel(model=model, openai_client=client)
        agent = Agent(name="assistant", model=responses)
    try:
        yield agent, client, f"OpenAI API at {client.base_url}"
    finally:
        await client.close()


class SdkLog(logging.Handler):
    """Holds the SDK's and openai's log records, so none lands in the middle of an answer."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.lines.append(" ".join(record.getMessage().split()))

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


@contextlib.contextmanager
def sdk_logs_held() -> Iterator[SdkLog]:
    """Route the ``openai`` loggers (the SDK logs as ``openai.agents``) to a :class:`SdkLog`."""
    handler, logger = SdkLog(), logging.getLogger("openai")
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


class _Waiting:
    """A dim ``waiting…`` after ``assistant>`` until the first text arrives (terminals only)."""

    _TEXT = "waiting"

    def __init__(self, console: Console) -> None:
        self._file = console.file
        self._shown = 0
        self._task: asyncio.Task[None] | None = None
        if console.is_terminal:
            self._task = asyncio.ensure_future(self._animate())
            self._draw(self._TEXT + "…")

    def _draw(self, text: str) -> None:
        self._erase()
        self._file.write(f"\x1b[2m{text}\x1b[0m")
        self._file.flush()
        self._shown = len(text)

    def _erase(self) -> None:
        if self._shown:
            self._file.write("\b" * self._shown + " " * self._shown + "\b" * self._shown)
            self._shown = 0

    async def _animate(self) -> None:
        for dots in itertools.cycle((" ·", " ··", " ···", "…")):
            await asyncio.sleep(0.3)
            self._draw(self._TEXT + dots)

    def done(self) -> None:
        """Erase the indicator (idempotent): the answer's first text goes where it was."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
            self._erase()
            self._file.flush()


async def stream_answer(
    console: Console,
    attempt: Attempt,
    lines: LineSource,
    stop_requests: asyncio.Event,
    sdk_log: SdkLog | None = None,
) -> None:
    """Print the answer as it streams; stop it on ``/stop`` or Ctrl-C (``stop_requests``).

    On a terminal a dim indicator waits for the first text, and what is typed meanwhile is not
    echoed (a ``/stop`` never lands inside the answer). What the SDK logs meanwhile is shown
    after the answer, on its own lines.
    """
    console.print("[bold]assistant>[/bold] ", end="")
    waiting = _Waiting(console)

    async def show() -> None:
        try:
            async for delta in attempt:
                waiting.done()
                console.print(escape(delta), end="", soft_wrap=True)
        finally:
            waiting.done()

    stop_requests.clear()
    held: list[str | None] = []  # a line typed while streaming waits for the next prompt
    with lines.streaming():
        printer = asyncio.ensure_future(show())
        while not printer.done():
            waits: set[asyncio.Future[Any]] = {printer, asyncio.ensure_future(stop_requests.wait())}
            reader = asyncio.ensure_future(lines.typed()) if not held else None
            if reader is not None:
                waits.add(reader)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waits:
                if waiter is not printer and waiter is not reader:
                    waiter.cancel()
            if reader is not None and reader.done():
                line = reader.result()
                if line is not None and line.strip() == "/stop":
                    await attempt.stop()
                else:
                    held.append(line)
            elif reader is not None:
                reader.cancel()  # it was only waiting, so no line is lost
            if stop_requests.is_set():
                await attempt.stop()
        await printer
    for line in held:
        lines.push_back(line)
    console.print()
    for text in sdk_log.take() if sdk_log is not None else ():
        console.print(f"[dim]  log: {escape(text)}[/dim]", soft_wrap=True)
    with contextlib.suppress(Exception):
        await attempt  # a failure is reported from the record below


@click.command()
@click.option("--db", type=click.Path(dir_okay=False), help="SQLite file (default: in memory).")
@click.option(
    "--conversation", "conversation_id", help="Resume this chat from --db (an id or a prefix)."
)
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default=None,
    help="State owner of a new chat (default: previous_response).",
)
@click.option("--budget", help="Token budget of each request (a positive integer).")
@click.option("--model", default="gpt-4.1", show_default=True, help="Model name.")
@click.option("--system", default="You are a helpful assistant.", help="System message.")
@agent_option
@click.option("--offline", is_flag=True, help="Use the built-in mock even if a key is set.")
def chat(
    db: str | None,
    conversation_id: str | None,
    strategy: str | None,
    budget: str | None,
    model: str,
    system: str,
    agent_spec: str | None,
    offline: bool,
) -> None:
    """Chat interactively; type /help for the commands."""
    budget_value = parse_budget(budget)
    if conversation_id is not None and db is None:
        raise click.UsageError("--conversation needs --db (the file the chat is stored in)")
    if db is not None and conversation_id is not None and not os.path.isfile(db):
        raise click.ClickException(f"no such database file: {db}")
    offline = offline or not os.environ.get("OPENAI_API_KEY")
    if offline:  # the mock's traces would go nowhere; against the real API the SDK's stay on
        set_tracing_disabled(True)
    settings = _Settings(db, conversation_id, strategy, budget_value, model, system, agent_spec)
    try:
        asyncio.run(_repl(settings, offline))
    except (asyncio.CancelledError, KeyboardInterrupt):  # Ctrl-C at the prompt
        click.echo()


@dataclasses.dataclass(frozen=True)
class _Settings:
    db: str | None
    conversation_id: str | None
    strategy: str | None
    budget: int | None
    model: str
    system: str
    agent_spec: str | None


async def _repl(settings: _Settings, offline: bool) -> None:
    console = make_console()
    db, conversation_id = settings.db, settings.conversation_id
    store = SQLiteStore(db) if db is not None else InMemoryStore()
    talker = chat_agent(offline, settings.model, settings.agent_spec)
    async with store, talker as (agent, client, where):
        if conversation_id is not None:
            from .inspect import pick_conversation

            conversation_id = await pick_conversation(store, conversation_id, str(db))
        chat_ = await open_conversation(
            store,
            conversation_id,
            strategy=settings.strategy or (None if conversation_id else "previous_response"),  # type: ignore[arg-type]
            agent=agent,
            budget=settings.budget,
            system=None if conversation_id else settings.system,
            client=client,
            create=conversation_id is None,
        )
        console.print(
            f"chat {chat_.id} · strategy {chat_.strategy} · budget {chat_.budget or '∞'} · "
            f"{escape(where)} · /help for commands",
            soft_wrap=True,
        )
        for text in pending_lines(await chat_.pending_approvals()):
            console.print(text, soft_wrap=True)
        loop = asyncio.get_running_loop()
        stop_requests = asyncio.Event()
        interrupts = _Interrupts(loop, chat_, stop_requests)
        lines = open_lines(console, loop, interrupts.suspended)
        with sdk_logs_held() as sdk_log, interrupts:
            commands = Commands(
                console,
                chat_,
                lambda attempt: stream_answer(console, attempt, lines, stop_requests, sdk_log),
                lambda: lines.prompt("new text: "),
            )
            while True:
                for text in sdk_log.take():  # logged outside an answer: before the prompt
                    console.print(f"[dim]  log: {escape(text)}[/dim]", soft_wrap=True)
                line = await lines.prompt("you> ")
                if line is None:
                    if isinstance(lines, PipeLines):
                        console.print()
                    break
                try:
                    if not await commands.run(line):
                        break
                except (StateExtError, ValueError, KeyError, click.ClickException) as exc:
                    if isinstance(exc, click.ClickException):
                        message = exc.format_message()
                    else:
                        message = describe_error(exc) or str(exc)
                    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)


class _Interrupts:
    """Ctrl-C stops the streaming answer; when nothing streams it leaves the chat.

    ``suspended()`` lifts the handler while a terminal prompt reads a line (readline then
    sees Ctrl-C itself, and the prompt ends the chat).
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, chat_: Conversation, event: asyncio.Event
    ) -> None:
        self._loop, self._chat, self._event = loop, chat_, event
        self._main = asyncio.current_task()
        self._installed = False

    def _interrupted(self) -> None:
        if self._chat.in_flight is not None:
            self._event.set()
        elif self._main is not None:
            self._main.cancel()

    def __enter__(self) -> _Interrupts:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            self._loop.add_signal_handler(signal.SIGINT, self._interrupted)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            self._loop.remove_signal_handler(signal.SIGINT)
            self._installed = False

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        installed = self._installed
        self.__exit__()
        try:
            yield
        finally:
            if installed:
                self.__enter__()


__doc__ += "\n\nCommands:\n\n" + COMMANDS_HELP
