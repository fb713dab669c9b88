"""``ServerConversationTracker``: the durable ledger of what the server holds for a conversation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._acknowledged import Acknowledged
from ._cursor import Cursor
from ._dedupe import Dedupe
from ._ids import uuid4_hex
from ._items import keys as _keys
from ._journal import Journal, JournalEntry
from ._open_calls import OpenCalls, checked_policy
from ._outbox import Outbox
from ._repairs import OpenCallsPolicy, ToolCallRepair
from ._tracker_codec import TRACKER_VERSION, check_version, dump_items
from .errors import StateBlobError
from .types import ServerStrategyName

__all__ = ["ServerConversationTracker"]

Strategy = ServerStrategyName


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
        open_calls_policy: OpenCallsPolicy = "interrupt",
    ) -> None:
        self._cursor = Cursor(strategy, previous_response_id, conversation_id)
        self._acks = Acknowledged(max_digests)
        self.open_calls_policy: OpenCallsPolicy = checked_policy(open_calls_policy)
        """What closes an open call whose output the run never produced (see OpenCallsPolicy)."""
        self.prompt_cache_key = prompt_cache_key or f"agents-state-ext:{uuid4_hex()}"
        """One stable prompt cache key for every request of this conversation."""
        self._dedupe = Dedupe()
        self._outbox = Outbox(self._dedupe)
        self._journal = Journal()
        self._calls = OpenCalls()

    @property
    def strategy(self) -> Strategy:
        """The server strategy this ledger serves, read from the cursor it holds."""
        return self._cursor.strategy

    @property
    def previous_response_id(self) -> str | None:
        """The id of the most recent acknowledged response that had an id."""
        return self._cursor.previous_response_id

    @property
    def conversation_id(self) -> str | None:
        """The Conversations API conversation this tracker follows, if any."""
        return self._cursor.conversation_id

    @property
    def last_item_id(self) -> str | None:
        """The id of the newest item known to be in the server conversation (reconciliation)."""
        return self._acks.last_item_id

    @property
    def superseded(self) -> list[str]:
        """The cursors a compaction or re-seed replaced, oldest first (the newest 8).

        Response ids of an earlier chain, or ids of an earlier server conversation: a RunState
        made on one of them belongs to this conversation and resumes on the current cursor.
        """
        return self._cursor.superseded

    def supersedes(self, cursor: str) -> bool:
        """Whether ``cursor`` (a response or conversation id) is one a restart replaced."""
        return self._cursor.supersedes(cursor)

    def missing_from(self, items: Iterable[Any]) -> list[str]:
        """Server ids of the current chain's acknowledged items that ``items`` do not carry.

        Reasoning items are not counted (their ids may be omitted on replay), nor input the
        app sent without an id, whose server id the client never learns: only what can be
        checked is. Sorted.
        """
        return self._acks.missing_from({_keys(item).item_id for item in items})

    @property
    def pending(self) -> list[dict[str, Any]]:
        """Items sent but never acknowledged, in the order they will be re-sent (copies)."""
        return dump_items(self._outbox.pending)

    @property
    def uncertain(self) -> list[dict[str, Any]]:
        """Items of a failed request the server may have accepted; reconciled before a resend."""
        if not self._outbox.uncertain:
            return []  # asked before every request
        return dump_items(self._outbox.uncertain)

    @property
    def in_flight(self) -> bool:
        """Whether a request has been marked sent and is neither acknowledged nor rewound."""
        return self._outbox.in_flight is not None

    @property
    def open_calls(self) -> list[str]:
        """Call ids of tool calls the server holds without an output, oldest first."""
        return self._calls.ids

    @property
    def unsent_outputs(self) -> list[dict[str, Any]]:
        """Tool outputs for open calls that the run produced but never sent (copies)."""
        return self._calls.unsent_outputs

    @property
    def repairs(self) -> list[ToolCallRepair]:
        """The newest open calls closed before a request (100 kept), oldest first."""
        return self._calls.repairs

    def record_output(self, item: Any) -> bool:
        """Keep a tool output the run produced for an open call, to close it with if unsent.

        Returns whether it was kept (False: no such open call, or its output was sent).
        """
        return self._calls.record_output(item)

    def supply_outputs(self, outputs: Mapping[str, str]) -> None:
        """Give open calls their outputs (call id -> output text); sent with the next request.

        An unknown or already answered call id raises ``KeyError`` and nothing is kept.
        """
        self._calls.supply(outputs)

    def has_item_id(self, item_id: str) -> bool:
        """Whether the server acknowledged an item with this id."""
        return self._acks.has_item_id(item_id)

    def has_call_output(self, call_id: str) -> bool:
        """Whether the server acknowledged a tool output for this call id."""
        return call_id in self._acks.call_ids

    def is_acknowledged(self, item: Any) -> bool:
        """Whether the server already holds ``item`` by id, tool call id, digest or identity."""
        return self._dedupe.acknowledged(item, _keys(item), self._acks)

    def reduce(self, items: Sequence[Any]) -> list[Any]:
        """The list to send for ``items``: pending items first, then what the server lacks.

        A pending item is not put in front when ``items`` already holds it: the same object (the
        SDK hands the same objects again on a retry) or a copy with the same server id or tool
        output call id (a resumed run rebuilds its objects). Returns a new list holding the
        caller's own item objects; nothing is copied.
        """
        result, read = self._dedupe.to_send(list(items), self._outbox.pending, self._acks)
        return self._calls.close(result, read, self._acks.call_ids, self.open_calls_policy)

    def left_out(self, offered: Sequence[Any], items: Iterable[Any]) -> None:
        """A ``call_model_input_filter`` left ``items`` of ``offered`` out of the next request.

        Of them, what the server lacks was never sent: offered again later in this run in front
        of an item that request carried, an id-less one is not taken for "sent before an
        acknowledged item". Until it is sent, or :meth:`end_run`.
        """
        self._dedupe.leave_out(offered, items, self._acks)

    def expect_copies(self, items: Iterable[Any]) -> None:
        """The run now starting sends ``items`` itself: a resumed RunState's pending input.

        The SDK keeps input staged on a RunState (``RunState.add_input``) pending until a
        request carrying it succeeds, and sends it from the RunState again after a failure,
        as a new object (a restored RunState rebuilds them all). The ledger holds its own copy
        of that failed request's input; a held item with no server id or call id whose content
        equals one of ``items`` is that same occurrence, so it is not put in front of the run's
        copy and leaves the held lists when that copy is sent (one held copy per item). The
        RunState stays the owner of its input: the SDK records it as the run's once accepted.
        Until :meth:`end_run`; a new call replaces the expectation.
        """
        self._dedupe.expect(items)

    def mark_sent(self, items: Sequence[Any], *, replacing: Sequence[Any] = ()) -> list[Any]:
        """Record ``items`` as exactly the list of the request about to be sent.

        ``replacing`` are held items the request stands for in another form (what a
        ``call_model_input_filter`` rewrote): they leave pending like the sent ones. Returns the
        batch now in flight (pass it to :meth:`rewind` / :meth:`mark_uncertain`).
        """
        batch = list(items)
        self._dedupe.sent(batch)
        self._calls.sent(batch)
        return self._outbox.send(
            batch, replacing, in_doubt=self._cursor.conversation_id is not None
        )

    def hold(self, items: Sequence[Any]) -> None:
        """Input a run was given but never sent: pending, so the next request carries it once."""
        self._outbox.hold([item for item in items if not self.is_acknowledged(item)])

    def acknowledge(
        self, response_id: str | None, output: Iterable[Any] = (), *, consumed: Iterable[Any] = ()
    ) -> None:
        """The in-flight request succeeded: the server now holds its input and ``output``.

        ``consumed`` are items the request stood for without carrying them (the input a
        ``call_model_input_filter`` replaced): offered again within this run (the same object,
        or for id-less input a copy with the same content), they are dropped.
        """
        batch = self._outbox.take()
        entry = JournalEntry(response_id, self._cursor.previous_response_id, batch)
        for item in (*batch, *output):
            self._remember(item, entry)
        self._dedupe.consume(consumed)
        if self._cursor.conversation_id is not None:
            self._journal.undelivered = {"response_id": response_id, "output": list(output)}
        elif response_id is not None:
            self._cursor.previous_response_id = response_id
            self._journal.append(entry)

    def rewind(self, batch: Sequence[Any] | None = None) -> None:
        """The in-flight request failed: its items go back in front, to be sent again.

        With ``batch`` (the list given to :meth:`mark_sent`), only when that request is still
        the one in flight: a request settled late changes nothing of a newer one.
        """
        self._outbox.rewind(batch)

    def mark_uncertain(self, batch: Sequence[Any] | None = None) -> None:
        """The in-flight request failed after the server may have accepted it.

        Used under the conversation strategy, where re-sending an accepted item duplicates it:
        the items wait in :attr:`uncertain` until :meth:`settle_uncertain` is given evidence.
        ``batch`` is as for :meth:`rewind`.
        """
        self._outbox.mark_uncertain(batch)

    def settle_uncertain(
        self,
        *,
        accepted: bool,
        server_items: Iterable[Any] = (),
        output: Sequence[Any] | None = None,
    ) -> None:
        """Resolve :attr:`uncertain` with evidence read from the server.

        ``accepted`` says the server holds the uncertain items (they become acknowledged along
        with ``server_items``, everything the conversation gained); otherwise they are pending.
        ``output`` is what the server answered to them (the gained items that are not the
        batch), kept as :attr:`undelivered` for the run that never heard it.
        """
        batch = self._outbox.settle()
        if accepted:
            for item in (*batch, *server_items):
                self._remember(item)
            if output:
                self._journal.undelivered = {"response_id": None, "output": list(output)}
        else:
            self._outbox.requeue(batch)

    @property
    def undelivered(self) -> dict[str, Any] | None:
        """The newest response the server holds that no run has processed yet, if any.

        Conversation strategy only: ``{"response_id": ..., "output": [items]}`` of a response
        acknowledged (or found by reconciliation) whose run ended before it processed it. A
        resume of that run gets it instead of asking the model again.
        """
        return self._journal.undelivered

    def clear_undelivered(self) -> None:
        """The newest response reached a run (or a new turn goes on after it)."""
        self._journal.undelivered = None

    def restart(self, window: Sequence[Any], *, conversation_id: str | None = None) -> None:
        """Continue from a compacted ``window`` instead of the old server chain.

        Under previous_response the next request starts a new chain (no previous id) carrying
        the window in front; under conversation the tracker moves to ``conversation_id``, which
        already holds the window. What was acknowledged stays known: the window stands for it.
        The old cursor joins :attr:`superseded`.
        """
        self._outbox.rewind()
        self._cursor.restart(conversation_id)
        # The calls the old chain left open are not in the new one (unless the window has them).
        self._calls.clear()
        self._journal.clear()
        self._acks.new_chain()
        if self._cursor.conversation_id is not None:
            self._acks.last_item_id = None
            for item in window:
                self._remember(item)
        else:
            self._outbox.prepend(window)

    def drop_pending(self) -> None:
        """Forget every pending and uncertain item (they will not be sent again)."""
        self._outbox.drop()

    def end_run(self) -> None:
        """Forget per-run knowledge (object identities, filter-replaced input) at a run's end."""
        self._dedupe.end_run()

    def rollback_to(self, previous_response_id: str | None) -> bool:
        """Step the cursor back to ``previous_response_id`` over the newest acknowledgements.

        For a resume whose RunState never processed the newest responses: what those
        responses acknowledged is forgotten and the input they carried is pending again, so
        the resumed run forks the chain from where the RunState stands. Returns False (and
        changes nothing) when the journal does not reach that far.
        """
        if self._cursor.previous_response_id == previous_response_id:
            return True
        undo = self._journal.take_back(self._cursor.previous_response_id, previous_response_id)
        if undo is None:
            return False
        for entry in undo:
            self._acks.forget(entry)
            self._outbox.undo(entry)
            self._calls.undo(entry)
        self._cursor.previous_response_id = previous_response_id
        self._dedupe.forget_objects()
        return True

    def _remember(self, item: Any, entry: JournalEntry | None = None) -> None:
        self._dedupe.seen(item)
        read = self._acks.remember(item, entry)
        self._calls.acknowledged(read, self._acks.call_ids, entry)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, versioned snapshot.

        A request in flight is saved as pending under previous_response (re-sent from the old
        cursor, it forks the chain) and as uncertain under conversation (the server may accept
        it, so it is reconciled before anything is re-sent).
        """
        return {
            "version": TRACKER_VERSION,
            **self._cursor.to_dict(),
            "max_digests": self._acks.max_digests,
            "prompt_cache_key": self.prompt_cache_key,
            **self._acks.to_dict(),
            **self._outbox.to_dict(in_doubt=self._cursor.conversation_id is not None),
            "open_calls_policy": self.open_calls_policy,
            **self._calls.to_dict(),
            "undelivered": self._journal.dump_undelivered(),
            "superseded": self._cursor.superseded,
            "retired_ids": self._acks.retired(),
            "journal": self._journal.to_list(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerConversationTracker:
        """Rebuild a tracker from :meth:`to_dict`; bad or newer data raises ``StateBlobError``."""
        check_version(data)
        try:
            cursor = Cursor.from_dict(data)
            tracker = cls(
                max_digests=int(data.get("max_digests", 4096)),
                prompt_cache_key=data.get("prompt_cache_key"),
                open_calls_policy=data.get("open_calls_policy", "interrupt"),
            )
            tracker._acks = Acknowledged.from_dict(data, tracker._acks.max_digests)
            tracker._outbox = Outbox.from_dict(data, tracker._dedupe)
            tracker._journal = Journal.from_dict(data)
            tracker._calls = OpenCalls.from_dict(data)
            tracker._cursor = cursor
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateBlobError(f"malformed tracker state: {exc}") from exc
        return tracker

    def __repr__(self) -> str:
        return (
            f"ServerConversationTracker(strategy={self.strategy!r}, "
            f"previous_response_id={self.previous_response_id!r}, "
            f"conversation_id={self.conversation_id!r}, acknowledged={len(self._acks)}, "
            f"pending={len(self._outbox.pending)}, uncertain={len(self._outbox.uncertain)})"
        )
