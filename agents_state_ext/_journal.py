"""The journal of the newest acknowledgements, so a resume can step back over them."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._tracker_codec import dump_items, dump_undelivered, load_items, load_undelivered, strings

JOURNAL_LENGTH = 8


@dataclass
class JournalEntry:
    """What one acknowledged response changed in the ledger, to undo it."""

    response_id: str | None
    previous: str | None
    """The cursor before this response: where undoing it steps back to."""
    sent: list[Any]
    """The request's items: the objects themselves, copied only when serialized."""
    item_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    """The tool calls this response made."""
    closed: list[list[str]] = field(default_factory=list)
    """``[call_id, call type]`` of the open calls this response answered."""

    def to_dict(self) -> dict[str, Any]:
        """The entry, JSON-ready (the sent items as copies)."""
        return {
            "response_id": self.response_id,
            "previous": self.previous,
            "item_ids": list(self.item_ids),
            "call_ids": list(self.call_ids),
            "digests": list(self.digests),
            "opened": list(self.opened),
            "closed": copy.deepcopy(self.closed),
            "sent": dump_items(self.sent),
        }

    @classmethod
    def from_dict(cls, data: Any) -> JournalEntry:
        """Read back :meth:`to_dict`; bad data raises ``TypeError`` (or the like)."""
        if not isinstance(data, Mapping):
            raise TypeError("a journal entry must be an object")
        return cls(
            data.get("response_id"),
            data.get("previous"),
            load_items(data.get("sent", [])),
            item_ids=strings(data.get("item_ids", [])),
            call_ids=strings(data.get("call_ids", [])),
            digests=strings(data.get("digests", [])),
            opened=strings(data.get("opened", [])),
            closed=[[str(c), str(k)] for c, k in data.get("closed", [])],
        )


class Journal:
    """The newest responses, for a resume whose run never processed them.

    Under previous_response, the newest acknowledged responses of the chain (8 kept, oldest
    first), so a resume can step back over a response the SDK never processed (e.g. a stream
    cancelled right after response.completed). Under conversation, the newest response no run
    has processed yet (``undelivered``: ``{"response_id": ..., "output": [items]}``), for the
    resume to get instead of asking the model again.
    """

    __slots__ = ("_entries", "undelivered")

    def __init__(
        self, entries: Iterable[JournalEntry] = (), undelivered: dict[str, Any] | None = None
    ) -> None:
        self._entries: deque[JournalEntry] = deque(entries, maxlen=JOURNAL_LENGTH)
        self.undelivered = undelivered

    def __iter__(self) -> Iterator[JournalEntry]:
        return iter(self._entries)

    def append(self, entry: JournalEntry) -> None:
        """Keep ``entry`` as the newest (the oldest goes when the journal is full)."""
        self._entries.append(entry)

    def clear(self) -> None:
        """A new chain: nothing before it can be stepped back to."""
        self._entries.clear()

    def take_back(self, cursor: str | None, target: str | None) -> list[JournalEntry] | None:
        """Remove and return, newest first, the entries from ``cursor`` back to ``target``.

        ``None`` (and nothing removed) when the journal does not reach back that far.
        """
        undo: list[JournalEntry] = []
        for entry in reversed(self._entries):
            if cursor == target:
                break
            undo.append(entry)
            cursor = entry.previous
        if cursor != target:
            return None
        for _ in undo:
            self._entries.pop()
        return undo

    def to_list(self) -> list[dict[str, Any]]:
        """The entries, JSON-ready, oldest first."""
        return [entry.to_dict() for entry in self._entries]

    def dump_undelivered(self) -> dict[str, Any] | None:
        """The undelivered response, JSON-ready."""
        return dump_undelivered(self.undelivered)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Journal:
        """Read back ``journal`` (:meth:`to_list`) and ``undelivered``; bad data raises."""
        entries = [JournalEntry.from_dict(e) for e in data.get("journal", [])]
        return cls(entries, load_undelivered(data.get("undelivered")))
