"""What an attempt tells a UI while it runs: its text deltas and its :class:`AttemptEvent`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agents.items import RunItem, ToolCallItem, ToolCallOutputItem

from .._event_names import AttemptEventKind

__all__ = ["AttemptEvent", "AttemptEventKind", "Events"]


@dataclass(frozen=True)
class AttemptEvent:
    """One thing an attempt did, for a UI that shows it live (see :meth:`Attempt.events`).

    ``status``: ``{"status"}``, when its start is stored (``queued``), when text starts to
    stream (``streaming``) and once at the end (its final status, once stored: not when the
    store refused it, see :attr:`Attempt.end_refused`). ``delta``: ``{"text"}``.
    ``tool_call``: ``{"call_id", "name", "arguments"}`` (the model asked for a tool).
    ``tool_result``: ``{"call_id", "output"}`` (the tool answered; ``output`` is text).
    """

    kind: AttemptEventKind
    data: dict[str, Any] = field(default_factory=dict)


class _Listener:
    """One listener's queue of an attempt's events; iteration ends when the attempt does."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[AttemptEvent | None] = asyncio.Queue()

    def __aiter__(self) -> _Listener:
        return self

    async def __anext__(self) -> AttemptEvent:
        event = await self.queue.get()
        if event is None:
            raise StopAsyncIteration
        return event


class Events:
    """An attempt's text deltas (one reader) and its events (any number of listeners)."""

    def __init__(self, *, live: bool) -> None:
        self.deltas: asyncio.Queue[str | None] = asyncio.Queue()
        self._listeners: list[_Listener] | None = [] if live else None  # None once ended
        if not live:
            self.deltas.put_nowait(None)

    def listen(self) -> AsyncIterator[AttemptEvent]:
        """A new listener, which sees what happens from now on."""
        listener = _Listener()
        if self._listeners is None:
            listener.queue.put_nowait(None)
        else:
            self._listeners.append(listener)
        return listener

    def emit(self, kind: AttemptEventKind, **data: Any) -> None:
        """Tell every listener."""
        for listener in self._listeners or ():
            listener.queue.put_nowait(AttemptEvent(kind, data))

    def delta(self, text: str) -> None:
        """A piece of the answer's text streamed in."""
        self.deltas.put_nowait(text)
        self.emit("delta", text=text)

    def items(self, items: list[RunItem], announced: set[Any]) -> None:
        """The tool calls and results among a run's ``items`` (``announced`` calls: told before)."""
        for item in items:
            if isinstance(item, ToolCallItem):
                if item.call_id in announced:
                    continue
                raw = _raw(item.raw_item)
                arguments = raw.get("arguments", raw.get("action", ""))
                self.emit(
                    "tool_call",
                    call_id=item.call_id,
                    name=item.tool_name or raw.get("type"),
                    arguments=arguments if isinstance(arguments, str) else str(arguments),
                )
            elif isinstance(item, ToolCallOutputItem):
                output = _raw(item.raw_item).get("output", item.output)
                self.emit(
                    "tool_result",
                    call_id=item.call_id,
                    output=output if isinstance(output, str) else str(output),
                )

    def finish(self, *, text: str | None, status: str | None) -> None:
        """The attempt has ended: the whole ``text`` (when not streamed), its final ``status``
        (when stored), then every iteration ends."""
        if text is not None:
            self.deltas.put_nowait(text)
            if text:
                self.emit("delta", text=text)
        self.deltas.put_nowait(None)
        if status is not None:
            self.emit("status", status=status)
        listeners, self._listeners = self._listeners or [], None
        for listener in listeners:
            listener.queue.put_nowait(None)


def _raw(item: Any) -> dict[str, Any]:
    """A run item's raw Responses item as a dict (the SDK keeps a model or a dict)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    return dump(exclude_unset=True) if callable(dump) else {}
