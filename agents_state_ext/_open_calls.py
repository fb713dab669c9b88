"""The tool calls the server holds without an output, and what answers them before a request."""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from ._items import Facts
from ._items import keys as _keys
from ._journal import JournalEntry
from ._repairs import (
    INTERRUPTED_TOOL_OUTPUT,
    TEXT_OUTPUTS,
    InterruptedToolCallWarning,
    OpenCallsPolicy,
    ToolCallRepair,
    closure,
)
from ._tracker_codec import dump_items
from .errors import OpenToolCallsError

REPAIR_HISTORY = 100


def checked_policy(policy: OpenCallsPolicy) -> OpenCallsPolicy:
    """``policy`` if it is one (see :data:`~agents_state_ext._repairs.OpenCallsPolicy`)."""
    if policy not in ("interrupt", "raise"):
        raise ValueError("open_calls_policy must be 'interrupt' or 'raise'")
    return policy


class OpenCalls:
    """Tool calls the server holds without an output (call id -> call type), oldest first.

    With them: the outputs the run produced for them but never sent, the closures handed out
    for a request but not yet sent, and the newest repairs (what closed a call, and how).
    """

    __slots__ = ("_closing", "_open", "_repairs", "_unsent")

    def __init__(self) -> None:
        self._open: dict[str, str] = {}
        self._unsent: dict[str, Any] = {}
        self._closing: dict[str, Any] = {}
        self._repairs: deque[ToolCallRepair] = deque(maxlen=REPAIR_HISTORY)

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._open

    @property
    def ids(self) -> list[str]:
        """Call ids of the open calls, oldest first."""
        return list(self._open)

    @property
    def unsent_outputs(self) -> list[dict[str, Any]]:
        """Outputs the run produced for open calls but never sent (copies)."""
        return dump_items(self._unsent.values())

    @property
    def repairs(self) -> list[ToolCallRepair]:
        """The newest calls closed before a request, oldest first."""
        return list(self._repairs)

    def record_output(self, item: Any) -> bool:
        """Keep ``item``, a tool output for an open call; whether it was kept."""
        call_id = _keys(item).output_call_id
        if call_id is None or call_id not in self._open:
            return False
        self._unsent[call_id] = item
        self._closing.pop(call_id, None)
        return True

    def supply(self, outputs: Mapping[str, str]) -> None:
        """Keep an output text for each call id; an id that is not open raises ``KeyError``."""
        unknown = [call_id for call_id in outputs if call_id not in self._open]
        if unknown:
            raise KeyError(f"no open tool call with id {unknown[0]!r} (open: {self.ids})")
        for call_id, text in outputs.items():
            self.record_output(closure(call_id, self._open[call_id], str(text)))

    def opened(self, call_id: str, kind: str) -> bool:
        """The server now holds call ``call_id`` (of type ``kind``); whether it is new here."""
        if call_id in self._open:
            return False
        self._open[call_id] = kind
        return True

    def answered(self, call_id: str) -> str | None:
        """The server now holds an output for ``call_id``: the call's type if it was open."""
        self._unsent.pop(call_id, None)
        return self._open.pop(call_id, None)

    def acknowledged(self, read: Facts, answered: set[str], entry: JournalEntry | None) -> None:
        """The server holds the item read as ``read`` (``answered``: the calls it has outputs for).

        An output closes its call, a call the server holds no output for opens; what changed is
        noted in the journal ``entry``.
        """
        call_id = read[0].output_call_id
        if call_id is not None:
            kind = self.answered(call_id)
            if kind is not None and entry is not None:
                entry.closed.append([call_id, kind])
        call = read[2]
        if (
            call is not None
            and call[0] not in answered
            and self.opened(*call)  # held open whether or not an entry is kept
            and entry is not None
        ):
            entry.opened.append(call[0])

    def undo(self, entry: JournalEntry) -> None:
        """Undo what ``entry`` noted: its answers are gone, and so are the calls it opened."""
        for call_id, kind in entry.closed:
            self._open[call_id] = kind
        self.forget(entry.opened)

    def forget(self, call_ids: Iterable[str]) -> None:
        """These calls are gone from the chain, and so is everything that answers them."""
        for call_id in call_ids:
            self._open.pop(call_id, None)
            self._unsent.pop(call_id, None)
            self._closing.pop(call_id, None)

    def clear(self) -> None:
        """A new chain: none of the old chain's calls is open in it (repairs are kept)."""
        self._open.clear()
        self._unsent.clear()
        self._closing.clear()

    def sent(self, batch: list[Any]) -> None:
        """``batch`` is being sent: the closures it carries are handed out no more."""
        if self._closing:
            for call_id in [c for c, item in self._closing.items() if _holds(batch, item)]:
                del self._closing[call_id]

    def close(
        self,
        batch: list[Any],
        read: list[Facts],
        answered: set[str],
        policy: OpenCallsPolicy,
    ) -> list[Any]:
        """``batch`` with every call it leaves without an output answered exactly once.

        Calls the server holds open are answered in front (their output belongs right after
        them in the chain); a call carried by ``batch`` itself (a re-seeded window) right after
        that call. The answer is the run's real output when it produced one, else a synthesized
        one (or :class:`~agents_state_ext.OpenToolCallsError` under the ``raise`` policy).
        ``read`` is :func:`~agents_state_ext._items.facts` of each item of ``batch``;
        ``answered`` the call ids the server holds an output for.
        """
        calls: list[tuple[int, tuple[str, str]]] = []
        carried: set[str] = set()
        for index, (found, _, call) in enumerate(read):
            if call:
                calls.append((index, call))
            if found.output_call_id is not None:
                carried.add(found.output_call_id)
        if not self._open and not calls:
            return batch  # the common request: nothing open, no call in it
        # Plain loops: comprehensions are frames of their own, and this runs per request.
        front: list[tuple[str, str]] = []
        for c, kind in self._open.items():
            if c not in carried:
                front.append((c, kind))
        inline: dict[int, tuple[str, str]] = {}
        for index, call in calls:
            if call[0] not in carried and call[0] not in answered:
                inline[index] = call
        if not front and not inline:
            return batch
        wanted = [*front, *inline.values()]
        lacking = [c for c, kind in wanted if c not in self._unsent and c not in self._closing]
        if lacking and (
            policy == "raise" or any(kind not in TEXT_OUTPUTS for c, kind in wanted if c in lacking)
        ):
            raise OpenToolCallsError(
                f"the server holds tool calls without outputs ({', '.join(lacking)}) and this "
                "run did not produce them; supply them with ConversationState.close_tool_calls"
                "({call_id: output}) and run again",
                lacking,
            )
        result = [self._closing_item(c, kind) for c, kind in front]
        for index, item in enumerate(batch):
            result.append(item)
            if index in inline:
                result.append(self._closing_item(*inline[index]))
        return result

    def _closing_item(self, call_id: str, kind: str) -> Any:
        if call_id in self._closing:
            return self._closing[call_id]
        item = self._unsent.pop(call_id, None)
        repair = ToolCallRepair(call_id, "output" if item is not None else "interrupted")
        if item is None:
            item = closure(call_id, kind, INTERRUPTED_TOOL_OUTPUT)
        self._closing[call_id] = item
        self._repairs.append(repair)
        warnings.warn(
            f"tool call {call_id} was left without an output by an interrupted run; it is "
            + (
                "answered now with the output the run produced"
                if repair.closed_with == "output"
                else "closed now as interrupted"
            ),
            InterruptedToolCallWarning,
            stacklevel=2,
        )
        return item

    def to_dict(self) -> dict[str, Any]:
        """The open calls, the unsent outputs and the repairs, JSON-ready."""
        return {
            "open_calls": dict(self._open),
            "unsent_outputs": self.unsent_outputs,
            "repairs": [r.to_dict() for r in self._repairs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpenCalls:
        """Read back :meth:`to_dict` (missing keys: nothing open); bad data raises."""
        calls = cls()
        calls._open = {str(c): str(k) for c, k in dict(data.get("open_calls", {})).items()}
        for output in data.get("unsent_outputs", []):
            calls.record_output(dict(output))
        calls._repairs.extend(
            ToolCallRepair(str(r["call_id"]), r["closed_with"]) for r in data.get("repairs", [])
        )
        return calls


def _holds(batch: list[Any], item: Any) -> bool:
    return any(each is item for each in batch)
