"""Compaction that keeps the conversation's state owner (``ConversationState.compact``).

One owner, every path: the compacted window goes where the history lives — the next request of
a new ``previous_response_id`` chain, a new server conversation, or the session itself — and
nowhere else. Replay gets it back to use as its history.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._items import content_text, item_to_dict
from ._reconcile import reconcile_conversation
from .errors import (
    IncompleteHistoryError,
    InvalidTargetError,
    MixedStateOwnerError,
    OpenToolCallsError,
    PreviousResponseNotFoundError,
    RunInProgressError,
)
from .types import CompactionMode

if TYPE_CHECKING:
    from agents.memory import Session

    from ._run import RunLifecycle
    from ._tracker import ServerConversationTracker

__all__ = [
    "CompactionMode",
    "CompactionResult",
    "check_mode",
    "compact_chain",
    "compact_conversation",
    "compact_items",
    "compact_session",
]

_CHUNK = 20  # the Conversations API takes at most 20 items per call
_PAGE = 100


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did: the mode used, the compacted window, and where it now lives.

    ``items`` is the window as the owner now holds it: the next request of a new chain, the
    new server conversation (``conversation_id``), or the rewritten session.
    """

    mode: Literal["previous_response_id", "input"]
    items: list[dict[str, Any]] = field(default_factory=list)
    response_id: str | None = None
    conversation_id: str | None = None


def check_mode(mode: CompactionMode) -> None:
    """Refuse an unknown compaction mode before anything is read or sent."""
    if mode not in ("auto", "previous_response_id", "input"):
        raise ValueError(f"unknown compaction mode {mode!r}")


async def compact_items(
    strategy: str, client: Any, model: str, items: list[Any] | None, mode: CompactionMode
) -> CompactionResult:
    """Compact client-held ``items`` (replay): the window goes back to the app."""
    check_mode(mode)
    if mode == "previous_response_id":
        raise ValueError(f"a {strategy} conversation keeps no server chain to compact")
    if not items:
        raise ValueError("input-mode compaction needs the client-held items (items=...)")
    response = await _compact(client, model=model, input=_as_input(items))
    return CompactionResult(mode="input", items=_window(response), response_id=response["id"])


def _server_ready(lifecycle: RunLifecycle, mode: CompactionMode) -> ServerConversationTracker:
    """The ledger to compact, once no run is in flight and no tool call is left open."""
    check_mode(mode)
    if lifecycle.active:
        raise RunInProgressError("compact() while a run is in flight")
    tracker = lifecycle.tracker
    if tracker.open_calls:
        raise OpenToolCallsError(
            "the server holds tool calls without outputs "
            f"({', '.join(tracker.open_calls)}); a compaction would hide the calls from the "
            "outputs that must follow them: finish the run (or close them with "
            "close_tool_calls and run once), then compact",
            tracker.open_calls,
        )
    return tracker


# -- previous_response ------------------------------------------------------------------------


async def compact_chain(
    lifecycle: RunLifecycle,
    client: Any,
    model: str,
    items: list[Any] | None,
    mode: CompactionMode,
    store: bool,
) -> CompactionResult:
    """Compact a ``previous_response_id`` chain (see ``ConversationState.compact``)."""
    tracker = _server_ready(lifecycle, mode)
    chain = tracker.previous_response_id
    if mode == "previous_response_id" and not store:
        raise ValueError("store=False keeps no server chain: compact with mode='input'")
    if mode == "previous_response_id" and chain is None:
        raise ValueError("compaction through the server chain needs a previous response id")
    response: dict[str, Any] | None = None
    if mode != "input" and chain is not None and store:
        try:
            response = await _compact(client, model=model, previous_response_id=chain)
        except Exception as exc:
            if not _chain_lost(exc):
                raise
            if mode == "previous_response_id" or items is None:
                raise PreviousResponseNotFoundError(
                    f"the server no longer knows response {chain!r}, so its chain cannot be "
                    "compacted; pass the history the app holds as items= (input mode is the "
                    "fallback), or re-seed with ConversationState.reseed(items). Nothing changed",
                    chain,
                    tracker.pending,
                ) from exc
    used: Literal["previous_response_id", "input"] = "previous_response_id"
    held = tracker.pending if chain is None else []
    if response is None and held:
        # No chain yet (an earlier compaction, a re-seed, a failed first request): what the
        # ledger holds pending is the whole history the new chain will get, so it is compacted
        # and replaced, never sent beside its own window.
        if items is not None and _as_input(items) != _as_input(held):
            raise MixedStateOwnerError(
                "this conversation has no server chain yet and its ledger holds the history "
                "the next request starts it with; items= would be a second one: pass items=None"
            )
        used = "input"
        response = await _compact(client, model=model, input=_as_input(held))
        tracker.drop_pending()
    elif response is None:
        used = "input"
        response = await _compact(client, model=model, input=_checked(tracker, items))
    window = _window(response)
    # Never both: the old chain is left behind, and the window goes in front of the next turn.
    tracker.restart(window)
    return CompactionResult(mode=used, items=window, response_id=response["id"])


def _chain_lost(error: BaseException) -> bool:
    """Whether the server answered that it no longer knows the chain's response."""
    if getattr(error, "code", None) == "previous_response_not_found":
        return True
    status = getattr(error, "status_code", None)
    return status in (400, 404) and getattr(error, "param", None) == "previous_response_id"


def _checked(tracker: ServerConversationTracker, items: list[Any] | None) -> list[Any]:
    """``items`` as compaction input, refused when they lack part of what the server holds."""
    if not items:
        raise ValueError("input-mode compaction needs the client-held items (items=...)")
    missing = tracker.missing_from(items)
    if missing:
        raise IncompleteHistoryError(
            f"the items to compact lack {len(missing)} item(s) this conversation's server "
            f"history holds ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
            "compacting them would silently drop that history. Give the whole history, "
            "compact through the server chain, or re-seed with ConversationState.reseed(items)",
            missing,
        )
    return _as_input(items)


# -- conversation -----------------------------------------------------------------------------


async def compact_conversation(
    lifecycle: RunLifecycle,
    client: Any,
    model: str,
    items: list[Any] | None,
    mode: CompactionMode,
) -> CompactionResult:
    """Compact a server conversation into a new one (see ``ConversationState.compact``)."""
    tracker = _server_ready(lifecycle, mode)
    if mode == "previous_response_id":
        raise ValueError(
            "a server conversation has no response chain to compact; compaction lists its "
            "items (mode='input', the default)"
        )
    # A request the server may have accepted is settled first: listed into the window while
    # the ledger still waits on it, it would be sent again on the new conversation.
    if tracker.uncertain:
        await reconcile_conversation(tracker, client)
    old = tracker.conversation_id
    if items is None:
        window_in = _as_input(await _list(client, str(old)))
        if not window_in:
            raise ValueError(f"conversation {old} holds nothing to compact")
    else:
        window_in = _checked(tracker, items)
    response = await _compact(client, model=model, input=window_in)
    window = _window(response)
    seed = [_seed(item) for item in window]
    conversation = await client.conversations.create(items=seed[:_CHUNK])
    for start in range(_CHUNK, len(seed), _CHUNK):
        await client.conversations.items.create(conversation.id, items=seed[start : start + _CHUNK])
    # The new conversation's own ids, read back: evidence for a later reconciliation.
    tracker.restart(await _list(client, conversation.id), conversation_id=conversation.id)
    return CompactionResult(
        mode="input", items=window, response_id=response["id"], conversation_id=conversation.id
    )


async def _list(client: Any, conversation_id: str) -> list[dict[str, Any]]:
    listed = client.conversations.items.list(conversation_id, order="asc", limit=_PAGE)
    return [item_to_dict(item) async for item in listed]


def _seed(item: dict[str, Any]) -> dict[str, Any]:
    """A window item as a new conversation item: ids belong to the conversation they came from.

    As a fork's seed (``chat/forks.py``): messages as type, role and content; a compaction
    item as its encrypted content; other items without their id, unless the API requires one.
    """
    kind = item.get("type", "message")
    if kind == "message":
        role, content = item.get("role"), item.get("content")
        if role == "assistant":
            content = content_text(content)
        return {"type": "message", "role": role, "content": content}
    if kind == "compaction":
        return {"type": "compaction", "encrypted_content": item.get("encrypted_content")}
    if kind in ("function_call", "function_call_output") or (
        kind == "reasoning" and item.get("encrypted_content")
    ):
        return {k: v for k, v in item.items() if k not in ("id", "status")}
    return dict(item)  # hosted tool calls and the like: the API requires their id


# -- session ----------------------------------------------------------------------------------


async def compact_session(
    session: Session,
    client: Any,
    model: str,
    items: list[Any] | None,
    mode: CompactionMode,
) -> CompactionResult:
    """Compact a session's items and rewrite the session (see ``ConversationState.compact``)."""
    check_mode(mode)
    from agents.memory import OpenAIConversationsSession

    if isinstance(session, OpenAIConversationsSession):
        raise ValueError(
            "an OpenAIConversationsSession keeps its history on the server; compact it as a "
            "server conversation with ConversationState.conversation(conversation_id)"
        )
    if mode == "previous_response_id":
        raise ValueError("a session conversation keeps no server chain: compact with mode='input'")
    if getattr(session, "keeps_every_item", False) is True:
        # Checked before anything is sent: the rewrite would be refused after the request.
        raise InvalidTargetError(
            f"{type(session).__name__} keeps every item (a chat never deletes), so compaction "
            "cannot rewrite it; compact the items into a new chat or a session of its own"
        )
    held = await session.get_items()
    if items is not None and _as_input(items) != _as_input(held):
        raise MixedStateOwnerError(
            "items= differ from the session's items: under the session strategy the session "
            "owns the history, so it is what gets compacted (pass items=None)"
        )
    if not held:
        raise ValueError("the session holds nothing to compact")
    response = await _compact(client, model=model, input=_as_input(held))
    window = _window(response)
    await _replace_session(session, window)
    return CompactionResult(mode="input", items=window, response_id=response["id"])


async def _replace_session(session: Session, window: list[dict[str, Any]]) -> None:
    """Replace the session's items with ``window`` as one step: on any failure, restore them."""
    previous = await session.get_items()  # read again: the compact call took time
    try:
        await session.clear_session()
        await session.add_items(list(window))  # type: ignore[arg-type]
    except BaseException:
        restore = asyncio.ensure_future(_restore(session, previous))
        while not restore.done():  # a cancelled caller still waits for the restore
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(restore)
        if not restore.cancelled() and restore.exception() is not None:
            warnings.warn(
                "a failed compaction could not put the session's items back: "
                f"{restore.exception()!r}",
                RuntimeWarning,
                stacklevel=2,
            )
        raise


async def _restore(session: Session, items: list[Any]) -> None:
    if list(await session.get_items()) == list(items):
        return  # clearing failed before changing anything
    await session.clear_session()
    if items:
        await session.add_items(items)


# -- the compact call and its window ----------------------------------------------------------


def _as_input(items: list[Any]) -> list[dict[str, Any]]:
    """Items as compaction input: plain dicts without the SDK's session-only metadata."""
    out: list[dict[str, Any]] = []
    for item in items:
        data = item_to_dict(item)
        out.append({k: v for k, v in data.items() if k != "created_by" and not k.startswith("_")})
    return out


def _window(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The compacted output, ready to be sent again as input.

    An assistant message id names a reasoning item it came with; when the compacted output
    holds no reasoning, such ids point at nothing and the API refuses them, so they go.
    """
    output = [dict(item) for item in response.get("output") or [] if isinstance(item, dict)]
    if any(item.get("type") == "reasoning" for item in output):
        return output
    return [
        {k: v for k, v in item.items() if k != "id"} if item.get("role") == "assistant" else item
        for item in output
    ]


async def _compact(client: Any, **params: Any) -> dict[str, Any]:
    # The server's own JSON: the typed model would re-shape compacted user messages.
    raw = await client.responses.with_raw_response.compact(**params)
    data = raw.http_response.json()
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError("/responses/compact returned something other than a compaction")
    return data
