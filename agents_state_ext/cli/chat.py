"""``agents-state-ext chat``: an interactive chat that streams, stops, retries, edits, branches.

With ``OPENAI_API_KEY`` set it talks to the real OpenAI API; otherwise (or with
``--offline``) to the built-in mock, which streams a slow echo so ``/stop`` has time to act,
and answers ``delete <path>`` with a call of a (pretend) ``delete_file`` tool that needs
approval: the chat shows the pending call and waits for ``/approve`` or ``/reject``.
Lines are read on a thread, so ``/stop`` typed while an answer streams stops it (so does
Ctrl-C); any other line typed meanwhile waits its turn.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any

import click
from agents import Agent, OpenAIResponsesModel, function_tool, set_tracing_disabled
from rich.console import Console
from rich.markup import escape

from ..chat import STRATEGIES, Attempt, Conversation, open_conversation
from ..chat.records import check_budget
from ..errors import StateExtError
from ..stores import InMemoryStore, SQLiteStore
from .commands import COMMANDS_HELP, Commands
from .render import make_console, pending_lines

if TYPE_CHECKING:
    from ..testing import Reply, ResponseContext

__all__ = ["chat", "parse_budget"]


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


class _Lines:
    """Lines of a text stream read on a daemon thread, with push-back; ``None`` at the end."""

    def __init__(self, stream: IO[str], loop: asyncio.AbstractEventLoop) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._back: collections.deque[str | None] = collections.deque()
        self._loop = loop
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):
                line = ""
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line or None)
            if not line:
                return

    def push_back(self, line: str | None) -> None:
        self._back.appendleft(line)

    async def next(self) -> str | None:
        if self._back:
            return self._back.popleft()
        line = await self._queue.get()
        return None if line is None else line.rstrip("\r\n")


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
async def _agent(offline: bool, model: str) -> AsyncIterator[tuple[Agent[Any], Any, str]]:
    if offline:
        from ..testing import MockResponsesAPI  # the kit loads only for the offline model

        async with MockResponsesAPI(model=model) as mock:
            mock.responder = _offline_reply
            client = mock.client()
            agent = Agent(
                name="assistant",
                model=OpenAIResponsesModel(model=model, openai_client=client),
                tools=[delete_file],
            )
            yield agent, client, "offline mock"
        return
    from openai import AsyncOpenAI

    client = AsyncOpenAI()
    agent = Agent(name="assistant", model=OpenAIResponsesModel(model=model, openai_client=client))
    try:
        yield agent, client, "OpenAI API"
    finally:
        await client.close()


async def stream_answer(
    console: Console, attempt: Attempt, lines: _Lines, stop_requests: asyncio.Event
) -> None:
    """Print the answer as it streams; stop it on ``/stop`` or Ctrl-C (``stop_requests``)."""
    console.print("[bold]assistant>[/bold] ", end="")

    async def show() -> None:
        async for delta in attempt:
            console.print(escape(delta), end="", soft_wrap=True)

    printer = asyncio.ensure_future(show())
    stop_requests.clear()
    held: list[str | None] = []  # a line typed while streaming waits for the next prompt
    while not printer.done():
        waits: set[asyncio.Future[Any]] = {printer, asyncio.ensure_future(stop_requests.wait())}
        reader = asyncio.ensure_future(lines.next()) if not held else None
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
    for line in held:
        lines.push_back(line)
    await printer
    console.print()
    with contextlib.suppress(Exception):
        await attempt  # a failure is reported from the record below


@click.command()
@click.option("--db", type=click.Path(dir_okay=False), help="SQLite file (default: in memory).")
@click.option("--conversation", "conversation_id", help="Resume this chat from --db.")
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default=None,
    help="State owner of a new chat (default: previous_response).",
)
@click.option("--budget", help="Token budget of each request (a positive integer).")
@click.option("--model", default="gpt-4.1", show_default=True, help="Model name.")
@click.option("--system", default="You are a helpful assistant.", help="System message.")
@click.option("--offline", is_flag=True, help="Use the built-in mock even if a key is set.")
def chat(
    db: str | None,
    conversation_id: str | None,
    strategy: str | None,
    budget: str | None,
    model: str,
    system: str,
    offline: bool,
) -> None:
    """Chat interactively; type /help for the commands."""
    set_tracing_disabled(True)
    budget_value = parse_budget(budget)
    if conversation_id is not None and db is None:
        raise click.UsageError("--conversation needs --db (the file the chat is stored in)")
    if db is not None and conversation_id is not None and not os.path.isfile(db):
        raise click.ClickException(f"no such database file: {db}")
    offline = offline or not os.environ.get("OPENAI_API_KEY")
    with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C at the prompt
        asyncio.run(_repl(db, conversation_id, strategy, budget_value, model, system, offline))


async def _repl(
    db: str | None,
    conversation_id: str | None,
    strategy: str | None,
    budget: int | None,
    model: str,
    system: str,
    offline: bool,
) -> None:
    console = make_console()
    store = SQLiteStore(db) if db is not None else InMemoryStore()
    async with store, _agent(offline, model) as (agent, client, where):
        chat_ = await open_conversation(
            store,
            conversation_id,
            strategy=strategy or (None if conversation_id else "previous_response"),  # type: ignore[arg-type]
            agent=agent,
            budget=budget,
            system=None if conversation_id else system,
            client=client,
            create=conversation_id is None,
        )
        console.print(
            f"chat {chat_.id} · strategy {chat_.strategy} · budget {chat_.budget or '∞'} · "
            f"{where} · /help for commands",
            soft_wrap=True,
        )
        for text in pending_lines(await chat_.pending_approvals()):
            console.print(text, soft_wrap=True)
        loop = asyncio.get_running_loop()
        lines = _Lines(sys.stdin, loop)
        stop_requests = asyncio.Event()
        _on_interrupt(loop, chat_, stop_requests)
        commands = Commands(
            console,
            chat_,
            lambda attempt: stream_answer(console, attempt, lines, stop_requests),
            lines.next,
        )
        while True:
            console.print("[bold]you>[/bold] ", end="")
            line = await lines.next()
            if line is None:
                console.print()
                break
            try:
                if not await commands.run(line):
                    break
            except (StateExtError, ValueError, KeyError, click.ClickException) as exc:
                message = exc.format_message() if isinstance(exc, click.ClickException) else exc
                console.print(f"[red]error:[/red] {escape(str(message))}", soft_wrap=True)


def _on_interrupt(
    loop: asyncio.AbstractEventLoop, chat_: Conversation, event: asyncio.Event
) -> None:
    """Ctrl-C stops the streaming answer; when nothing streams it leaves the chat."""
    main = asyncio.current_task()

    def interrupted() -> None:
        if chat_.in_flight is not None:
            event.set()
        elif main is not None:
            main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, interrupted)


__doc__ += "\n\nCommands:\n\n" + COMMANDS_HELP
