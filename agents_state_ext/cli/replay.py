"""``agents-state-ext replay STORE ATTEMPT``: send a stored attempt's request again.

The chat layer's ``Conversation.replay`` from a terminal: the attempt (an id or a unique
prefix, found in every chat of STORE unless ``--conversation`` names one) is rebuilt from its
record — model, settings, instructions, context, and the server cursor where the strategy
allows — and sent as a new sibling attempt with the same agent setup ``chat`` uses (the
offline mock without ``OPENAI_API_KEY`` or with ``--offline``, else the real API;
``--agent module:attr`` for your own). It prints the new answer, whether the rebuilt request
was byte-identical to the recorded one, and if not, why (each obstacle) and what differed.
The exit code is 1 when the replayed attempt failed; Ctrl-C stops it (its partial text is
kept, as ``/stop`` keeps it) and exits 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from typing import Any

import click
from agents import ModelSettings, set_tracing_disabled
from rich.markup import escape

from .._agent_spec import agent_option
from .._attempts import AttemptRecord
from ..chat import Attempt, ReplayReport, open_conversation
from ..errors import AttemptNotFoundError
from ..stores import ConversationStore
from ._refs import describe_error, short_ids
from .chat import chat_agent, sdk_logs_held
from .inspect import STORE_HELP, is_store_url, open_cli_store, pick_conversation
from .render import make_console

__all__ = ["find_attempt", "replay", "report_dict"]

_DEFAULT_MODEL = "gpt-4.1"  # only for a record that names no model: ``chat``'s default


@click.command(epilog=STORE_HELP)
@click.argument("store")
@click.argument("attempt")
@click.option(
    "--conversation",
    "conversation_ref",
    metavar="ID",
    help="The chat the attempt belongs to (an id or a prefix; default: found from ATTEMPT).",
)
@click.option("--model", help="Send to this model instead of the recorded one.")
@click.option(
    "--temperature",
    type=float,
    help="Sample at this temperature instead of the recorded one.",
)
@click.option(
    "--stream/--no-stream",
    default=True,
    show_default=True,
    help="Stream the answer as it arrives.",
)
@click.option("--offline", is_flag=True, help="Use the built-in mock even if a key is set.")
@agent_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def replay(
    store: str,
    attempt: str,
    conversation_ref: str | None,
    model: str | None,
    temperature: float | None,
    stream: bool,
    offline: bool,
    agent_spec: str | None,
    as_json: bool,
) -> int:
    """Send a stored attempt's request again and say whether it was identical.

    ATTEMPT is an attempt id (or its assistant message's id), or a unique prefix of one.
    The replay is a new sibling attempt, kept in STORE. --model and --temperature override
    the recorded request (the A/B case); the report then names them. Exits 1 when the
    replay failed.
    """
    offline = offline or not os.environ.get("OPENAI_API_KEY")
    if offline:  # the mock's traces would go nowhere; against the real API the SDK's stay on
        set_tracing_disabled(True)
    settings = ModelSettings(temperature=temperature) if temperature is not None else None
    request = _Request(store, attempt, conversation_ref, model, settings, stream, agent_spec)
    outcome = asyncio.run(_replay(request, offline, as_json))
    if as_json:
        data = report_dict(
            outcome.report,
            conversation_id=outcome.conversation_id,
            answer=outcome.answer,
            error=outcome.error,
            logs=outcome.logs,
        )
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        _print(outcome, store)
    status = outcome.report.replayed.status
    if status in ("failed", "cancelled"):
        ended = f": {outcome.error}" if outcome.error else ""
        click.echo(f"error: the replay {status}{ended}", err=True)
        return 1
    return 0


@dataclasses.dataclass(frozen=True)
class _Request:
    """What the command line asked for."""

    target: str
    ref: str
    conversation_ref: str | None
    model: str | None
    settings: ModelSettings | None
    stream: bool
    agent_spec: str | None


async def find_attempt(
    store: ConversationStore, ref: str, target: str, conversation_ref: str | None = None
) -> tuple[str, AttemptRecord]:
    """The chat and record of the attempt ``ref`` names: an id or a unique prefix.

    ``ref`` matches attempt ids and the assistant message ids of the records. Searched in
    every chat of ``store``, or only in ``conversation_ref`` (an id or a prefix) when given.
    An unknown ``ref`` raises ``AttemptNotFoundError``; an ambiguous one lists its matches.
    """
    if conversation_ref is not None:
        ids = [await pick_conversation(store, conversation_ref, target)]
    else:
        ids = await store.list_conversations()
    found: list[tuple[str, AttemptRecord]] = []
    for conversation_id in ids:
        found += [(conversation_id, r) for r in await store.list_attempts(conversation_id)]
    exact = [(c, r) for c, r in found if ref in (r.attempt_id, r.message_id)]
    matches = exact or [
        (c, r) for c, r in found if r.attempt_id.startswith(ref) or r.message_id.startswith(ref)
    ]
    if len(matches) == 1:
        return matches[0]
    where = target if conversation_ref is None else f"chat {ids[0]} of {target}"
    if not matches:
        raise AttemptNotFoundError(f"no attempt {ref!r} in {where}")
    chats = short_ids(ids)
    if exact:  # the same id in several chats (ids made per chat, as the demo's)
        listed = ", ".join(chats[c] for c, _ in matches)
        raise AttemptNotFoundError(
            f"attempt {ref!r} is in several chats of {target} ({listed}); "
            "name one with --conversation"
        )
    shown = short_ids(r.attempt_id for _, r in found)
    named = [f"{shown[r.attempt_id]} (chat {chats[c]})" for c, r in matches[:8]]
    more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
    raise AttemptNotFoundError(
        f"attempt id {ref!r} is ambiguous in {where}: it matches {', '.join(named)}{more}; "
        "type more of it"
    )


async def _replay(request: _Request, offline: bool, as_json: bool) -> _Outcome:
    store = await open_cli_store(request.target, read_only=False)
    try:
        conversation_id, original = await find_attempt(
            store, request.ref, request.target, request.conversation_ref
        )
        base_model = original.model or _DEFAULT_MODEL
        async with chat_agent(offline, base_model, request.agent_spec) as (agent, client, where):
            chat = await open_conversation(
                store, conversation_id, agent=agent, client=client, create=False
            )
            if not as_json:
                make_console().print(
                    escape(
                        f"replaying {original.attempt_id} of chat {conversation_id} · "
                        f"strategy {chat.strategy} · {where}"
                    ),
                    style="dim",
                    soft_wrap=True,
                )
            with sdk_logs_held() as sdk_log:
                started = await chat.replay(
                    original.attempt_id,
                    model=request.model,
                    model_settings=request.settings,
                    stream=request.stream,
                )
                await _show_answer(started.attempt, request.stream and not as_json, as_json)
                report = await started.report()
            error = describe_error(started.attempt.error) or report.replayed.error
            return _Outcome(conversation_id, report, started.attempt.text, error, sdk_log.take())
    finally:
        await store.aclose()


async def _show_answer(attempt: Attempt, streaming: bool, quiet: bool) -> None:
    """Print the answer as it streams (``streaming``) or once it is there; Ctrl-C stops it.

    A failure is not raised here: it is in the record the report shows.
    """
    console = make_console()
    shown = False
    try:
        if streaming:
            with contextlib.suppress(Exception):
                async for delta in attempt:
                    if not shown:
                        console.print("[bold]assistant>[/bold] ", end="")
                        shown = True
                    console.print(escape(delta), end="", soft_wrap=True)
            if shown:
                console.print()
        else:
            with contextlib.suppress(Exception):
                await attempt
            if attempt.text and not quiet:
                console.print(f"[bold]assistant>[/bold] {escape(attempt.text)}", soft_wrap=True)
    except asyncio.CancelledError:  # Ctrl-C: keep what arrived, as ``/stop`` does
        if shown:
            console.print()
        await attempt.stop()
        raise


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """A finished replay: its chat, the report, the answer, a readable error, the SDK's logs."""

    conversation_id: str
    report: ReplayReport
    answer: str
    error: str | None
    logs: list[str]


def _print(outcome: _Outcome, target: str) -> None:
    console = make_console()
    for text in outcome.logs:  # held while the answer streamed, so none landed inside it
        console.print(f"[dim]  log: {escape(text)}[/dim]", soft_wrap=True)
    console.print(escape(outcome.report.text()), soft_wrap=True)
    if outcome.report.replayed.status == "awaiting_approval":
        if is_store_url(target):
            there = f"`agents-state-ext serve --store {target}` (or the chat API)"
        else:
            there = (
                f"`agents-state-ext chat --db {target} --conversation {outcome.conversation_id}`"
            )
        console.print(
            escape(f"  tool calls await approval: approve or reject them in {there}"),
            soft_wrap=True,
        )


def report_dict(
    report: ReplayReport,
    *,
    conversation_id: str,
    answer: str,
    error: str | None = None,
    logs: list[str] | None = None,
) -> dict[str, Any]:
    """The ``--json`` form of a replay: the verdict, each obstacle, what differed, both records.

    ``differences`` names each input that differed (as ``AttemptDiff.inputs``); ``explain`` is
    the readable account of them; ``logs`` what the SDK logged meanwhile (a chain the server
    no longer knows is logged as an error before the replay goes out on a new one).
    """
    return {
        "conversation_id": conversation_id,
        "original": report.original.attempt_id,
        "replayed": report.replayed.attempt_id,
        "message_id": report.replayed.message_id,
        "identical": report.identical,
        "status": report.replayed.status,
        "error": error,
        "answer": answer,
        "obstacles": [{"kind": o.kind, "detail": o.detail} for o in report.obstacles],
        "differences": report.differences.inputs,
        "explain": report.differences.text(),
        "logs": list(logs or ()),
        "records": {
            "original": report.original.to_dict(),
            "replayed": report.replayed.to_dict(),
        },
    }
