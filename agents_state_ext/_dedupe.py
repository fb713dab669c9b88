"""The ledger's dedupe: what of a list the server already holds, and what a run taught it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ._acknowledged import Acknowledged
from ._items import Facts, ItemKeys, facts
from ._items import digest as _digest
from ._items import keys as _keys
from ._items import stable_key as _stable_key


class Dedupe:
    """The dedupe rules over what was acknowledged, and what the ledger knows within one run.

    Known only within a run (forgotten by :meth:`end_run`): the acknowledged item objects (the
    SDK hands the same objects back on later turns), the digests of id-less input a
    ``call_model_input_filter`` replaced (consumed) or left out of a request, and the digests
    of the id-less input a resumed RunState sends itself (expected copies).
    """

    __slots__ = ("_consumed", "_expected", "_left_out", "_objects")

    def __init__(self) -> None:
        self._objects: dict[int, Any] = {}
        # The SDK offers copies of the run's initial input again on later turns when a filter
        # rewrote it.
        self._consumed: set[str] = set()
        # Offered again before an item that request carried, it was still never sent.
        self._left_out: set[str] = set()
        # A held copy of one is that same occurrence (see expect).
        self._expected: Counter[str] = Counter()

    def acknowledged(self, item: Any, keys: ItemKeys, acks: Acknowledged) -> bool:
        """Whether the server holds ``item`` (read as ``keys``): by identity, id or digest."""
        if self._objects.get(id(item)) is item:
            return True
        if acks.holds(item, keys):
            return True
        item_id, call_id, digestible = keys
        if item_id is None and call_id is None and not digestible and self._consumed:
            return _digest(item) in self._consumed
        return False

    def lacking(self, incoming: list[Any], acks: Acknowledged) -> tuple[list[Facts], list[int]]:
        """:func:`facts` of each item, and the indexes of those the server lacks."""
        # Read once, in one pass: this runs before every request.
        read: list[Facts] = []
        acked: list[bool] = []
        last_acked = -1
        for index, item in enumerate(incoming):
            found = facts(item)
            read.append(found)
            flag = self.acknowledged(item, found[0], acks)
            acked.append(flag)
            if flag:
                last_acked = index
        unsent: list[int] = []
        for index, item in enumerate(incoming):
            if acked[index]:
                continue
            found = read[index]
            if (
                index < last_acked
                and found[0].item_id is None
                and found[0].output_call_id is None
                and not (self._left_out and _digest(item) in self._left_out)
            ):
                # Sent before an item the server acknowledged existed: it is in the chain.
                continue
            unsent.append(index)
        return read, unsent

    def to_send(
        self, incoming: list[Any], pending: list[Any], acks: Acknowledged
    ) -> tuple[list[Any], list[Facts]]:
        """What a request for ``incoming`` carries: ``pending`` first, then what the server lacks.

        With :func:`facts` of each item of it (the pending ones read afresh).
        """
        read, unsent = self.lacking(incoming, acks)
        result: list[Any] = []
        result_facts: list[Facts] = []
        if pending:
            result = self.waiting(pending, incoming, [f[0] for f in read])
            result_facts = [facts(item) for item in result]
        for index in unsent:
            result.append(incoming[index])
            result_facts.append(read[index])
        return result, result_facts

    def waiting(
        self, held: list[Any], batch: list[Any], keys: list[ItemKeys] | None = None
    ) -> list[Any]:
        """The items of ``held`` that ``batch`` does not carry.

        Carried: the same object, a copy with the same stable key, or (see :meth:`expect`) a
        copy with the same content of the resumed RunState's own input.
        """
        if not held:
            return []
        carried = {id(item) for item in batch}
        stable = {_stable_key(k) for k in (keys or map(_keys, batch))} - {None}
        waiting = [i for i in held if id(i) not in carried and _stable_key(_keys(i)) not in stable]
        if self._expected and waiting:
            return self._without_copies(waiting, batch)
        return waiting

    def _without_copies(self, held: list[Any], batch: list[Any]) -> list[Any]:
        """``held`` less one copy per expected item of ``batch`` (matched by content)."""
        offered: Counter[str] = Counter()
        for item in batch:
            if _stable_key(_keys(item)) is None:
                found = _digest(item)
                if found in self._expected:
                    offered[found] += 1
        if not offered:
            return held
        budget = offered & self._expected
        waiting = []
        for item in held:
            if _stable_key(_keys(item)) is None:
                found = _digest(item)
                if budget[found] > 0:
                    budget[found] -= 1
                    continue
            waiting.append(item)
        return waiting

    def leave_out(self, offered: Sequence[Any], items: Iterable[Any], acks: Acknowledged) -> None:
        """A filter left ``items`` of ``offered`` out: the id-less ones the server lacks count."""
        wanted = {id(item) for item in items}
        if not wanted:
            return
        incoming = list(offered)
        for index in self.lacking(incoming, acks)[1]:
            item = incoming[index]
            if id(item) in wanted and _stable_key(_keys(item)) is None:
                self._left_out.add(_digest(item))

    def expect(self, items: Iterable[Any]) -> None:
        """The run sends ``items`` itself (a resumed RunState's input); replaces the last call."""
        self._expected = Counter(
            _digest(item) for item in items if _stable_key(_keys(item)) is None
        )

    def seen(self, item: Any) -> None:
        """The server holds this very object (the SDK may hand it back within the run)."""
        self._objects[id(item)] = item

    def consume(self, items: Iterable[Any]) -> None:
        """A request stood for ``items`` without carrying them (what a filter replaced)."""
        for item in items:
            self._objects[id(item)] = item
            if _keys(item).item_id is None:
                self._consumed.add(_digest(item))

    def sent(self, batch: list[Any]) -> None:
        """``batch`` is being sent: what it carries is left out no more."""
        if self._left_out:
            for item in batch:
                self._left_out.discard(_digest(item))

    def forget_objects(self) -> None:
        """The objects seen are no proof any more (a rollback forgot what they stood for)."""
        self._objects.clear()

    def end_run(self) -> None:
        """The run ended: forget all it taught."""
        self._objects.clear()
        self._consumed.clear()
        self._expected.clear()
        self._left_out.clear()
