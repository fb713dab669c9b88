"""The items a ledger sent but the server never acknowledged: pending, in flight, uncertain."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Any

from ._dedupe import Dedupe
from ._items import keys as _keys
from ._journal import JournalEntry
from ._tracker_codec import dump_items, load_items


class Outbox:
    """The items sent but not acknowledged, each in one of three lists.

    ``pending`` goes in front of the next request; ``in_flight`` is the request marked sent
    and not yet settled; ``uncertain`` holds the items of a failed request the server may have
    accepted, until evidence settles them. Read the lists; change them through the methods.
    """

    __slots__ = ("_dedupe", "in_flight", "pending", "uncertain")

    def __init__(self, dedupe: Dedupe) -> None:
        self._dedupe = dedupe
        self.pending: list[Any] = []
        self.in_flight: list[Any] | None = None
        self.uncertain: list[Any] = []

    def send(self, batch: list[Any], replacing: Sequence[Any], *, in_doubt: bool) -> list[Any]:
        """``batch`` is the request about to be sent; what it carries or replaces leaves.

        A request still in flight (one that never reported back) goes back to pending, or to
        uncertain when ``in_doubt`` (a re-send of what the server accepted would duplicate it).
        """
        if self.in_flight is not None and in_doubt:
            self.mark_uncertain()
        elif self.in_flight is not None:
            self.rewind()
        if self.pending or self.uncertain:
            covered = [*batch, *replacing] if replacing else batch
            self.pending = self._dedupe.waiting(self.pending, covered)
            self.uncertain = self._dedupe.waiting(self.uncertain, covered)
        self.in_flight = batch
        return batch

    def take(self) -> list[Any]:
        """The request in flight succeeded: its items, no longer in flight."""
        batch = self.in_flight or []
        self.in_flight = None
        return batch

    def rewind(self, batch: Sequence[Any] | None = None) -> None:
        """The request in flight (``batch``, if given, only if still it) goes back to pending."""
        if self.in_flight is None or (batch is not None and self.in_flight is not batch):
            return
        batch, self.in_flight = self.in_flight, None
        self.requeue(batch)

    def mark_uncertain(self, batch: Sequence[Any] | None = None) -> None:
        """The request in flight (as for :meth:`rewind`) may have been accepted: uncertain."""
        if self.in_flight is None or (batch is not None and self.in_flight is not batch):
            return
        batch, self.in_flight = self.in_flight, None
        self.uncertain = batch + self.uncertain

    def requeue(self, batch: list[Any]) -> None:
        """``batch`` is to be sent again, in front of what pending holds besides."""
        self.pending = batch + self._dedupe.waiting(self.pending, batch)

    def hold(self, fresh: list[Any]) -> None:
        """``fresh`` was never sent: pending after what is, each item once."""
        self.pending = [*self.pending, *self._dedupe.waiting(fresh, self.pending)]

    def settle(self) -> list[Any]:
        """The uncertain items, taken out for a verdict."""
        batch, self.uncertain = self.uncertain, []
        return batch

    def prepend(self, window: Sequence[Any]) -> None:
        """A new chain starts from ``window``: it goes in front of pending."""
        self.pending = [*window, *self.pending]

    def undo(self, entry: JournalEntry) -> None:
        """Undo the response of ``entry``: its input is pending again, outputs to its calls not."""
        self.requeue(list(entry.sent))
        # The calls it made are gone from the chain, and so are answers to them.
        opened: Container[str | None] = set(entry.opened)
        self.pending = [i for i in self.pending if _keys(i).output_call_id not in opened]

    def drop(self) -> None:
        """Forget the pending and uncertain items (they will not be sent again)."""
        self.pending = []
        self.uncertain = []

    def to_dict(self, *, in_doubt: bool) -> dict[str, Any]:
        """Pending and uncertain, JSON-ready, the request in flight joining one of them.

        As pending (re-sent from the old cursor, it forks the chain), or as uncertain when
        ``in_doubt`` (the server may accept it, so it is reconciled before anything is re-sent).
        """
        pending = list(self.pending)
        uncertain = list(self.uncertain)
        if self.in_flight is not None and in_doubt:
            uncertain = self.in_flight + uncertain
        elif self.in_flight is not None:
            pending = self.in_flight + pending
        return {"pending": dump_items(pending), "uncertain": dump_items(uncertain)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], dedupe: Dedupe) -> Outbox:
        """Read back :meth:`to_dict` (nothing in flight)."""
        outbox = cls(dedupe)
        outbox.pending = load_items(data.get("pending", []))
        outbox.uncertain = load_items(data.get("uncertain", []))
        return outbox
