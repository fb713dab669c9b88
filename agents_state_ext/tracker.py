"""``ServerConversationTracker``: the durable ledger of what the server holds for a conversation."""

from __future__ import annotations

import copy
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ._items import ItemKeys, item_to_dict
from ._items import digest as _digest
from ._items import keys as _keys
from ._items import stable_key as _stable_key
from .errors import StateBlobError

__all__ = ["ServerConversationTracker"]

TRACKER_VERSION = 1
# Changelog of the serialized form (to_dict):
#   1: first version.

Strategy = Literal["previous_response", "conversation"]
JOURNAL_LENGTH = 8


class ServerConversationTracker:
    """What the server has acknowledged for one conversation, and what it has not got yet.

    The tracker holds the cursor (``previous_response_id`` or ``conversation_id``), the server
    item ids and tool call ids the server has acknowledged, bounded digests of id-less *output*
    items, the batch currently in flight, and the items that were sent but never acknowledged
    (``pending``). Every lookup is O(1) per item; memory grows with ids and fixed-size digests,
    not with item objects: kept whole are only pending, uncertain and in-flight items, the input
    of the last few acknowledged requests (a short journal for :meth:`rollback_to`), and within
    a run the acknowledged objects themselves (dropped by :meth:`end_run`).

    Dedupe rules (what "already acknowledged" means):

    - an item whose server ``id`` was acknowledged;
    - a tool output whose ``call_id`` the server already holds an output for;
    - an id-less output item (e.g. reasoning replayed without its id) whose digest was seen;
    - an id-less *input* only by position: it sits before an acknowledged item in the list, so
      it was sent before that item existed. Id-less inputs are never deduped by content: the
      same text ("yes") may legitimately be sent twice.

    Within one process the tracker also remembers acknowledged item *objects* until
    :meth:`end_run`, because the SDK hands the same objects back on later turns of a run.
    """

    def __init__(
        self,
        *,
        strategy: Strategy = "previous_response",
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        max_digests: int = 4096,
        prompt_cache_key: str | None = None,
    ) -> None:
        if strategy == "conversation" and not conversation_id:
            raise ValueError("the conversation strategy needs a conversation_id")
        if strategy == "previous_response" and conversation_id:
            raise ValueError("the previous_response strategy cannot hold a conversation_id")
        if max_digests < 1:
            raise ValueError("max_digests must be positive")
        self.strategy: Strategy = strategy
        self._previous_response_id = previous_response_id
        self._conversation_id = conversation_id
        self._max_digests = max_digests
        self.prompt_cache_key = prompt_cache_key or f"agents-state-ext:{uuid.uuid4().hex}"
        """One stable prompt cache key for every request of this conversation."""
        self._item_ids: set[str] = set()
        self._call_ids: set[str] = set()
        self._digests: OrderedDict[str, None] = OrderedDict()
        self._pending: list[Any] = []
        self._in_flight: list[Any] | None = None
        self._uncertain: list[Any] = []
        self._last_item_id: str | None = None
        self._acked_objects: dict[int, Any] = {}
        # The newest acknowledgements, so a resume can step back over a response the SDK
        # never processed (e.g. a stream cancelled right after response.completed).
        self._journal: deque[dict[str, Any]] = deque(maxlen=JOURNAL_LENGTH)

    # -- cursor -----------------------------------------------------------------------------

    @property
    def previous_response_id(self) -> str | None:
        """The id of the most recent acknowledged response that had an id."""
        return self._previous_response_id

    @property
    def conversation_id(self) -> str | None:
        """The Conversations API conversation this tracker follows, if any."""
        return self._conversation_id

    @property
    def last_item_id(self) -> str | None:
        """The id of the newest item known to be in the server conversation (reconciliation)."""
        return self._last_item_id

    @property
    def pending(self) -> list[dict[str, Any]]:
        """Items sent but never acknowledged, in the order they will be re-sent (copies)."""
        return [copy.deepcopy(item_to_dict(i)) for i in self._pending]

    @property
    def uncertain(self) -> list[dict[str, Any]]:
        """Items of a failed request the server may have accepted; reconciled before a resend."""
        return [copy.deepcopy(item_to_dict(i)) for i in self._uncertain]

    @property
    def in_flight(self) -> bool:
        """Whether a request has been marked sent and is neither acknowledged nor rewound."""
        return self._in_flight is not None

    def has_item_id(self, item_id: str) -> bool:
        """Whether the server acknowledged an item with this id."""
        return item_id in self._item_ids

    def has_call_output(self, call_id: str) -> bool:
        """Whether the server acknowledged a tool output for this call id."""
        return call_id in self._call_ids

    # -- dedupe -----------------------------------------------------------------------------

    def is_acknowledged(self, item: Any) -> bool:
        """Whether the server already holds ``item`` by id, tool call id, digest or identity."""
        return self._acknowledged(item, _keys(item))

    def _acknowledged(self, item: Any, keys: ItemKeys) -> bool:
        if self._acked_objects.get(id(item)) is item:
            return True
        item_id, call_id, digestible = keys
        if item_id is not None and item_id in self._item_ids:
            return True
        if call_id is not None and call_id in self._call_ids:
            return True
        if item_id is None and digestible:
            return _digest(item) in self._digests
        return False

    def reduce(self, items: Sequence[Any]) -> list[Any]:
        """The list to send for ``items``: pending items first, then what the server lacks.

        A pending item is not put in front when ``items`` already holds it: the same object (the
        SDK hands the same objects again on a retry) or a copy with the same server id or tool
        output call id (a resumed run rebuilds its objects). Returns a new list holding the
        caller's own item objects; nothing is copied.
        """
        incoming = list(items)
        keys = [_keys(item) for item in incoming]
        acked = [self._acknowledged(item, k) for item, k in zip(incoming, keys, strict=True)]
        last_acked = max((i for i, flag in enumerate(acked) if flag), default=-1)
        result = self._waiting(self._pending, incoming, keys)
        for index, item in enumerate(incoming):
            if acked[index]:
                continue
            item_id, output_call_id, _ = keys[index]
            if index < last_acked and item_id is None and output_call_id is None:
                # Sent before an item the server acknowledged existed: it is in the chain.
                continue
            result.append(item)
        return result

    @staticmethod
    def _waiting(
        held: list[Any], batch: list[Any], keys: list[ItemKeys] | None = None
    ) -> list[Any]:
        """The items of ``held`` that ``batch`` does not carry (by identity or stable key)."""
        if not held:
            return []
        carried = {id(item) for item in batch}
        stable = {_stable_key(k) for k in (keys or map(_keys, batch))} - {None}
        return [i for i in held if id(i) not in carried and _stable_key(_keys(i)) not in stable]

    # -- request lifecycle -------------------------------------------------------------------

    def mark_sent(self, items: Sequence[Any]) -> None:
        """Record ``items`` as exactly the list of the request about to be sent."""
        if self._in_flight is not None:
            # A request that never reported back (e.g. a killed task): keep its items.
            self.rewind()
        batch = list(items)
        self._pending = self._waiting(self._pending, batch)
        self._uncertain = self._waiting(self._uncertain, batch)
        self._in_flight = batch

    def acknowledge(self, response_id: str | None, output: Iterable[Any] = ()) -> None:
        """The in-flight request succeeded: the server now holds its input and ``output``."""
        batch = self._in_flight or []
        self._in_flight = None
        entry: dict[str, Any] = {
            "response_id": response_id,
            "previous": self._previous_response_id,
            "sent": batch,  # the objects themselves; copied only when serialized
            "item_ids": [],
            "call_ids": [],
            "digests": [],
        }
        for item in [*batch, *output]:
            self._remember(item, entry)
        if response_id is not None and self.strategy == "previous_response":
            self._previous_response_id = response_id
            self._journal.append(entry)

    def rewind(self) -> None:
        """The in-flight request failed: its items go back in front, to be sent again."""
        if self._in_flight is None:
            return
        batch, self._in_flight = self._in_flight, None
        self._requeue(batch)

    def _requeue(self, batch: list[Any]) -> None:
        self._pending = batch + self._waiting(self._pending, batch)

    def mark_uncertain(self) -> None:
        """The in-flight request failed after the server may have accepted it.

        Used under the conversation strategy, where re-sending an accepted item duplicates it:
        the items wait in :attr:`uncertain` until :meth:`settle_uncertain` is given evidence.
        """
        if self._in_flight is None:
            return
        batch, self._in_flight = self._in_flight, None
        self._uncertain = batch + self._uncertain

    def settle_uncertain(self, *, accepted: bool, server_items: Iterable[Any] = ()) -> None:
        """Resolve :attr:`uncertain` with evidence read from the server.

        ``accepted`` says the server holds the uncertain items (they become acknowledged along
        with ``server_items``, everything the conversation gained); otherwise they are pending.
        """
        batch, self._uncertain = self._uncertain, []
        if accepted:
            for item in batch:
                self._remember(item)
            for item in server_items:
                self._remember(item)
        else:
            self._requeue(batch)

    def restart(
        self,
        window: Sequence[Any],
        *,
        conversation_id: str | None = None,
    ) -> None:
        """Continue from a compacted ``window`` instead of the old server chain.

        Under previous_response the next request starts a new chain (no previous id) carrying
        the window in front; under conversation the tracker moves to ``conversation_id``, which
        already holds the window. What was acknowledged stays known: the window stands for it.
        """
        if self._in_flight is not None:
            self.rewind()
        if self.strategy == "conversation":
            if not conversation_id:
                raise ValueError("restarting a conversation tracker needs the new conversation_id")
            self._conversation_id = conversation_id
            self._last_item_id = None
            for item in window:
                self._remember(item)
            return
        self._previous_response_id = None
        self._pending = [*window, *self._pending]

    def drop_pending(self) -> None:
        """Forget every pending and uncertain item (they will not be sent again)."""
        self._pending = []
        self._uncertain = []

    def end_run(self) -> None:
        """Forget per-process object identities; called when the SDK run that used them ends."""
        self._acked_objects.clear()

    def rollback_to(self, previous_response_id: str | None) -> bool:
        """Step the cursor back to ``previous_response_id`` over the newest acknowledgements.

        For a resume whose RunState never processed the newest responses: what those
        responses acknowledged is forgotten and the input they carried is pending again, so
        the resumed run forks the chain from where the RunState stands. Returns False (and
        changes nothing) when the journal does not reach that far.
        """
        if self._previous_response_id == previous_response_id:
            return True
        undo: list[dict[str, Any]] = []
        cursor = self._previous_response_id
        for entry in reversed(self._journal):
            if cursor == previous_response_id:
                break
            undo.append(entry)
            cursor = entry["previous"]
        if cursor != previous_response_id:
            return False
        for entry in undo:
            self._journal.pop()
            self._item_ids.difference_update(entry["item_ids"])
            self._call_ids.difference_update(entry["call_ids"])
            for digest in entry["digests"]:
                self._digests.pop(digest, None)
            self._requeue(list(entry["sent"]))
        self._previous_response_id = previous_response_id
        self._acked_objects.clear()
        return True

    def _remember(self, item: Any, entry: dict[str, Any] | None = None) -> None:
        self._acked_objects[id(item)] = item
        item_id, call_id, digestible = _keys(item)
        if item_id is not None:
            if entry is not None and item_id not in self._item_ids:
                entry["item_ids"].append(item_id)
            self._item_ids.add(item_id)
            self._last_item_id = item_id
        if call_id is not None:
            if entry is not None and call_id not in self._call_ids:
                entry["call_ids"].append(call_id)
            self._call_ids.add(call_id)
        if digestible:
            # Digest without the id: the SDK may replay this output with its id stripped.
            digest = _digest(item)
            if entry is not None and digest not in self._digests:
                entry["digests"].append(digest)
            self._digests[digest] = None
            self._digests.move_to_end(digest)
            while len(self._digests) > self._max_digests:
                self._digests.popitem(last=False)

    # -- serialization -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, versioned snapshot; an in-flight request is saved as pending."""
        pending = list(self._pending)
        if self._in_flight is not None:
            pending = self._in_flight + pending
        return {
            "version": TRACKER_VERSION,
            "strategy": self.strategy,
            "previous_response_id": self._previous_response_id,
            "conversation_id": self._conversation_id,
            "max_digests": self._max_digests,
            "prompt_cache_key": self.prompt_cache_key,
            "item_ids": sorted(self._item_ids),
            "call_ids": sorted(self._call_ids),
            "digests": list(self._digests),
            "last_item_id": self._last_item_id,
            "pending": [copy.deepcopy(item_to_dict(i)) for i in pending],
            "uncertain": [copy.deepcopy(item_to_dict(i)) for i in self._uncertain],
            "journal": [
                {
                    **copy.deepcopy({k: v for k, v in e.items() if k != "sent"}),
                    "sent": [copy.deepcopy(item_to_dict(i)) for i in e["sent"]],
                }
                for e in self._journal
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerConversationTracker:
        """Rebuild a tracker from :meth:`to_dict`; bad or newer data raises ``StateBlobError``."""
        if not isinstance(data, Mapping):
            raise StateBlobError("tracker state must be a JSON object")
        version = data.get("version")
        if not isinstance(version, int) or version > TRACKER_VERSION or version < 1:
            raise StateBlobError(
                f"unsupported tracker state version {version!r} "
                f"(this library reads versions 1..{TRACKER_VERSION})"
            )
        try:
            tracker = cls(
                strategy=data["strategy"],
                previous_response_id=data.get("previous_response_id"),
                conversation_id=data.get("conversation_id"),
                max_digests=int(data.get("max_digests", 4096)),
                prompt_cache_key=data.get("prompt_cache_key"),
            )
            tracker._item_ids = {str(i) for i in data.get("item_ids", [])}
            tracker._call_ids = {str(i) for i in data.get("call_ids", [])}
            tracker._digests = OrderedDict((str(d), None) for d in data.get("digests", []))
            tracker._last_item_id = data.get("last_item_id")
            tracker._pending = [dict(i) for i in data.get("pending", [])]
            tracker._uncertain = [dict(i) for i in data.get("uncertain", [])]
            tracker._journal.extend(_journal_entry(e) for e in data.get("journal", []))
        except (KeyError, TypeError, ValueError) as exc:
            raise StateBlobError(f"malformed tracker state: {exc}") from exc
        return tracker

    def __repr__(self) -> str:
        return (
            f"ServerConversationTracker(strategy={self.strategy!r}, "
            f"previous_response_id={self._previous_response_id!r}, "
            f"conversation_id={self._conversation_id!r}, acknowledged={len(self._item_ids)}, "
            f"pending={len(self._pending)}, uncertain={len(self._uncertain)})"
        )


def _journal_entry(data: Any) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise TypeError("a journal entry must be an object")
    return {
        "response_id": data.get("response_id"),
        "previous": data.get("previous"),
        "sent": [dict(item) for item in data.get("sent", [])],
        "item_ids": [str(i) for i in data.get("item_ids", [])],
        "call_ids": [str(i) for i in data.get("call_ids", [])],
        "digests": [str(d) for d in data.get("digests", [])],
    }
