"""What the server acknowledged for one conversation, by id and by digest."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ._items import Facts, ItemKeys, facts
from ._items import digest as _digest
from ._journal import JournalEntry


class Acknowledged:
    """The server item ids, tool output call ids and digests the server acknowledged.

    Digests are of id-less *output* items, the newest ``max_digests`` kept. Of the item ids,
    those the current chain or conversation holds are told apart (reasoning aside): a restart
    leaves the older ones known, but not the chain's.
    """

    __slots__ = ("_chain_ids", "_digests", "_item_ids", "call_ids", "last_item_id", "max_digests")

    def __init__(self, max_digests: int) -> None:
        if max_digests < 1:
            raise ValueError("max_digests must be positive")
        self.max_digests = max_digests
        self._item_ids: set[str] = set()
        self.call_ids: set[str] = set()
        """The call ids the server holds an output for (read it; this class changes it)."""
        self._digests: OrderedDict[str, None] = OrderedDict()
        self._chain_ids: set[str] = set()
        self.last_item_id: str | None = None
        """The id of the newest item known to be in the server conversation."""

    def __len__(self) -> int:
        return len(self._item_ids)

    def has_item_id(self, item_id: str) -> bool:
        """Whether the server acknowledged an item with this id."""
        return item_id in self._item_ids

    def holds(self, item: Any, keys: ItemKeys) -> bool:
        """Whether ``item`` (read as ``keys``) is acknowledged by id, call id or digest."""
        item_id, call_id, digestible = keys
        if item_id is not None and item_id in self._item_ids:
            return True
        if call_id is not None and call_id in self.call_ids:
            return True
        return item_id is None and digestible and _digest(item) in self._digests

    def missing_from(self, carried: set[str | None]) -> list[str]:
        """The current chain's ids that ``carried`` lacks, sorted."""
        return sorted(self._chain_ids - carried)

    def new_chain(self) -> None:
        """A restart: what was acknowledged stays known, but the new chain holds none of it."""
        self._chain_ids.clear()

    def remember(self, item: Any, entry: JournalEntry | None) -> Facts:
        """The server holds ``item``; what is new is noted in ``entry``. Returns its facts."""
        read = facts(item)
        (item_id, call_id, digestible), item_type, _ = read
        if item_id is not None:
            if entry is not None and item_id not in self._item_ids:
                entry.item_ids.append(item_id)
            self._item_ids.add(item_id)
            self.last_item_id = item_id
            if item_type != "reasoning":
                self._chain_ids.add(item_id)
        if call_id is not None:
            if entry is not None and call_id not in self.call_ids:
                entry.call_ids.append(call_id)
            self.call_ids.add(call_id)
        if digestible:
            # Digest without the id: the SDK may replay this output with its id stripped.
            digest = _digest(item)
            if entry is not None and digest not in self._digests:
                entry.digests.append(digest)
            self._digests[digest] = None
            self._digests.move_to_end(digest)
            while len(self._digests) > self.max_digests:
                self._digests.popitem(last=False)
        return read

    def forget(self, entry: JournalEntry) -> None:
        """Undo what ``entry`` noted: the server no longer holds it for this chain."""
        self._item_ids.difference_update(entry.item_ids)
        self._chain_ids.difference_update(entry.item_ids)
        self.call_ids.difference_update(entry.call_ids)
        for digest in entry.digests:
            self._digests.pop(digest, None)

    def to_dict(self) -> dict[str, Any]:
        """The ids and digests, JSON-ready (``retired_ids`` apart: see :meth:`retired`)."""
        return {
            "item_ids": sorted(self._item_ids),
            "call_ids": sorted(self.call_ids),
            "digests": list(self._digests),
            "last_item_id": self.last_item_id,
        }

    def retired(self) -> list[str]:
        """The acknowledged ids the current chain does not count, sorted."""
        return sorted(self._item_ids - self._chain_ids)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], max_digests: int) -> Acknowledged:
        """Read back :meth:`to_dict` and :meth:`retired` (without them: the chain counts none)."""
        acked = cls(max_digests)
        acked._item_ids = {str(i) for i in data.get("item_ids", [])}
        acked.call_ids = {str(i) for i in data.get("call_ids", [])}
        acked._digests = OrderedDict((str(d), None) for d in data.get("digests", []))
        acked.last_item_id = data.get("last_item_id")
        if "retired_ids" in data:
            acked._chain_ids = acked._item_ids - {str(i) for i in data["retired_ids"]}
        return acked
