"""The fault soak's load: chats driven directly (chat layer) while a fault hits their store.

Each chat does what a user would — a new message, an edit of the last one, a retry — and
after a store error does something else, on the same handle or, every other time, on a new one
(another tab, another worker). Each user text is new, so a message the model sees twice is a
duplicate, never a coincidence. What it saw is kept for the checks (:mod:`.fault_checks`):
the answers it awaited complete, and every error by type.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agents_state_ext import open_conversation
from agents_state_ext.chat import Conversation
from agents_state_ext.errors import (
    ConcurrentUpdateError,
    StoreDataLostError,
    StoreError,
    StoreUnavailableError,
)

__all__ = ["TYPED", "ChatLog", "drive"]

TYPED = (StoreUnavailableError, ConcurrentUpdateError, StoreDataLostError)
"""The errors a store failure may surface as: anything else is a violation (typed errors only)."""
_GIVE_UP = 30  # store errors in a row after which a chat counts as stuck


@dataclass
class ChatLog:
    """What one chat's user saw."""

    chat_id: str
    strategy: str
    actions: int = 0
    answered: list[str] = field(default_factory=list)
    """Assistant node ids of the attempts awaited ``complete``."""
    errors: Counter[str] = field(default_factory=Counter)
    untyped: list[str] = field(default_factory=list)
    lost: bool = False
    """The store said the chat's data is gone (``StoreDataLostError``)."""
    stuck: bool = False
    handles: int = 1


async def _act(chat: Conversation, rng: random.Random, text: str) -> str:
    """One user action: a new message, an edit of the last one, or a retry; the answer's id."""
    action = rng.choice(["send", "send", "edit", "retry"])
    stream = rng.random() < 0.5
    users = [node for node in chat.active_path() if node.role == "user"]
    if action == "edit" and users:
        attempt = chat.edit(users[-1].id, text, stream=stream)
    elif action == "retry" and users:
        attempt = chat.retry(stream=stream)
    else:
        attempt = chat.send(text, stream=stream)
    await attempt
    return attempt.id if attempt.status == "complete" else ""


async def drive(
    chat: Conversation,
    log: ChatLog,
    turns: int,
    seed: int,
    options: dict[str, Any],
    *,
    until: asyncio.Future[Any] | None = None,
) -> None:
    """``turns`` actions that got through on ``chat`` (or on the handles that took over), and
    more until ``until`` is done (the fault is over)."""
    rng = random.Random(seed)
    failed_in_row = 0
    tries = 0
    while log.actions < turns or (until is not None and not until.done()):
        tries += 1
        try:
            answered = await _act(chat, rng, f"{log.chat_id[-6:]}-{tries}")
        except Exception as exc:  # what is not a typed store error is a finding
            log.errors[type(exc).__name__] += 1
            if not isinstance(exc, TYPED):
                log.untyped.append(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, StoreDataLostError):
                log.lost = True
                return
            failed_in_row += 1
            if failed_in_row >= _GIVE_UP:
                log.stuck = True
                return
            await asyncio.sleep(0.02 * min(failed_in_row, 10))
            if failed_in_row % 2 == 0:
                with contextlib.suppress(StoreError):
                    chat = await open_conversation(chat.store, chat.id, **options)
                    log.handles += 1
            continue
        failed_in_row = 0
        log.actions += 1
        if answered:
            log.answered.append(answered)
