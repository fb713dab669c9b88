"""``agents-state-ext demo``: stop, retry, edit and switch under each strategy, offline.

A real Agents SDK ``Runner`` talks to the built-in mock Responses/Conversations API; the chat
is kept in a SQLite file. For every attempt it prints what was sent (message ids with their
token counts, the budget, overflow), the server cursor before and after, and the request as
it crossed the wire; then each chat's graph and the server-side context of its last answer.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from agents import Agent, set_tracing_disabled
from rich.console import Console
from rich.markup import escape

from .._items import content_text
from .._state import StrategyName
from .._tokens import TokenCounter
from ..chat import Attempt, Conversation, open_conversation
from ..errors import ContextOverflowError
from ..stores import SQLiteStore
from .render import attempt_line, graph_tree, make_console, short, wire_line

if TYPE_CHECKING:
    from ..testing import MockResponsesAPI, Reply

__all__ = ["DEMO_STRATEGIES", "default_db_path", "demo", "run_demo"]

DEMO_STRATEGIES: tuple[StrategyName, ...] = (
    "replay",
    "session",
    "previous_response",
    "conversation",
)

_OWNERS = {
    "replay": "your app replays the budgeted active branch on every request",
    "session": "a graph-backed SDK Session hands Runner the budgeted active branch",
    "previous_response": "the Responses API owns history; each branch chains its own response id",
    "conversation": "the Conversations API owns history; a branch that diverges forks a new one",
}

_STORY = (
    "Once upon a time a small fox found a lantern in the snow, and the lantern "
    "began to hum a song that nobody in the forest had heard before..."
)


def _replies() -> list[Reply]:
    from ..testing import Reply

    return [
        Reply.text("Hello! How can I help?"),
        Reply.text(
            _STORY,
            chunks=[word + " " for word in _STORY.split(" ")[:-1]] + [_STORY.split(" ")[-1]],
            delay=0.005,
        ),
        Reply.text("A fox found a lantern in the snow; it lit the way home."),
        Reply.text("The fox lent the lantern to an owl who was afraid of the dark."),
        Reply.text("Snow falls soft / a lantern hums / the fox walks home."),
        Reply.text("You're welcome!"),
    ]


_LONG = "please " + "summarize everything we said so far in great detail " * 3


def default_db_path() -> str:
    """A fresh SQLite file in a new temporary folder (kept, so it can be inspected)."""
    return os.path.join(tempfile.mkdtemp(prefix="agents-state-ext-demo-"), "demo.sqlite3")


def _ids() -> Callable[[str], str]:
    # Short, stable ids of the same shape the chat prints (``msg_1``, ``att_1``), so that a
    # demo's output can be followed and its ids typed into ``chat`` or ``inspect``.
    counters: dict[str, itertools.count[int]] = {}

    def new_id(prefix: str) -> str:
        count = counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}_{next(count)}"

    return new_id


class _Demo:
    def __init__(self, console: Console, chat: Conversation, mock: MockResponsesAPI) -> None:
        self.console, self.chat, self.mock = console, chat, mock

    def say(self, text: str) -> None:
        self.console.print(text, soft_wrap=True)

    async def step(self, action: str, attempt: Attempt) -> Attempt:
        before = len(self.mock.response_requests)
        await attempt
        await self.report(action, attempt, before)
        return attempt

    async def report(self, action: str, attempt: Attempt, before: int) -> None:
        self.say(attempt_line(action, await self.chat.record(attempt.id)))
        for body in self.mock.response_requests[before:]:
            self.say(wire_line(body))
        self.say(f"    answer: {escape(repr(attempt.text))}")

    async def stop_after(self, attempt: Attempt, deltas: int) -> Attempt:
        before = len(self.mock.response_requests)
        seen = 0
        async for _ in attempt:
            seen += 1
            if seen >= deltas:
                await attempt.stop()
                break
        await attempt
        await self.report("stop", attempt, before)
        return attempt


async def _run_strategy(store: SQLiteStore, strategy: StrategyName, console: Console) -> str:
    from ..testing import MockResponsesAPI  # the kit loads only when the demo runs

    async with MockResponsesAPI() as mock:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
        chat = await open_conversation(
            store,
            strategy=strategy,
            agent=agent,
            budget=400,
            counter=TokenCounter("gpt-4.1"),
            system="You are a concise assistant.",
            id_factory=_ids(),
        )
        demo = _Demo(console, chat, mock)
        demo.say(f"\n[bold]== {strategy}[/bold]: {_OWNERS[strategy]}  (chat {chat.id})")
        mock.enqueue(*_replies())
        await demo.step("send", chat.send("hi"))
        story = await demo.stop_after(chat.send("tell me a story", stream=True), deltas=4)
        await demo.step("retry", chat.retry(stream=True))
        await demo.step("send", chat.send("and a sequel?"))
        await demo.step("edit", chat.edit(story.user_id, "tell me a poem instead"))
        greeting = chat.active_path()[2]  # system, "hi", the greeting
        await chat.switch(greeting.id)
        cursor = chat.cursor or "-"
        if strategy == "conversation" and chat.cursor is None:
            cursor = "- (the next attempt forks a new server conversation)"
        demo.say(
            f"  [bold]switch [/bold] to {short(greeting.id)} (the greeting, a new branch); "
            f"next cursor: {cursor}"
        )
        last = await demo.step("send", chat.send("thanks!"))
        await chat.set_budget(12)
        before, stored = len(mock.response_requests), len(await chat.attempts())
        try:
            await chat.send(_LONG)
        except ContextOverflowError as exc:
            sent = len(mock.response_requests) - before
            kept = len(await chat.attempts()) - stored
            demo.say(
                f"  [bold]send   [/bold] refused: {sent} requests sent, {kept} attempts stored"
            )
            demo.say(f"    {escape(str(exc))}")
        await chat.set_budget(400)
        console.print(graph_tree(chat.graph, f"graph of {chat.id} (* = active branch)"))
        record = await chat.record(last.id)
        if record.response_id is not None:
            context = mock.transcript(record.response_id)
            texts = [_item_text(item) for item in context]
            demo.say(
                f"  server-side context of {record.response_id} (the 'thanks!' answer): "
                + escape(", ".join(texts))
            )
        return chat.id


def _item_text(item: dict[str, Any]) -> str:
    text = " ".join(content_text(item.get("content")).split())
    return f"{item.get('role')}:{text[:20]!r}"


async def run_demo(
    db: str | None = None,
    *,
    strategies: tuple[StrategyName, ...] = DEMO_STRATEGIES,
    console: Console | None = None,
) -> str:
    """Run the demo into the SQLite file ``db`` (default: a new temp file); return its path."""
    console = console or make_console()
    path = db or default_db_path()
    console.print(
        f"agents-state-ext demo: offline, mock Responses API, SQLite store {path}", soft_wrap=True
    )
    async with SQLiteStore(path) as store:
        for strategy in strategies:
            await _run_strategy(store, strategy, console)
    console.print(f"\ninspect it: agents-state-ext inspect {path}", soft_wrap=True)
    return path


@click.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="SQLite file to write the chats to (default: a new temporary file).",
)
@click.option(
    "--strategy",
    "strategies",
    type=click.Choice(DEMO_STRATEGIES),
    multiple=True,
    help="Only these strategies (repeatable; default: all four).",
)
def demo(db: str | None, strategies: tuple[StrategyName, ...]) -> None:
    """Run a scripted chat (stop, retry, edit, switch) under each strategy, offline."""
    set_tracing_disabled(True)
    if (
        db is not None
        and os.path.dirname(os.path.abspath(db))
        and not os.path.isdir(os.path.dirname(os.path.abspath(db)))
    ):
        raise click.ClickException(f"the folder of --db {db!r} does not exist")
    asyncio.run(run_demo(db, strategies=strategies or DEMO_STRATEGIES))
