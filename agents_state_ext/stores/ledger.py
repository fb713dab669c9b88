"""What a store keeps as a ledger: the record, the fence on a commit, the capability protocol.

A ledger is opaque text kept per key under compare-and-set on a version, with a holder and a
lease (see :mod:`agents_state_ext.stores.lease`). This module knows nothing of what the text
means: the conversation state that writes it sits above the stores and registers how its
ledger is read back (:func:`use_ledger_codec`), so :class:`~agents_state_ext.stores.HeldState`
can load one without importing it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "Fence",
    "LedgerCodec",
    "LedgerRecord",
    "LedgerStore",
    "LedgerValue",
    "ledger_codec",
    "use_ledger_codec",
]


@dataclass(frozen=True)
class LedgerRecord:
    """A stored ledger: its text, its version, and who holds it until when.

    ``version`` starts at 1 and grows by one on every write. ``holder`` is the token of the
    worker driving the conversation (``None``: nobody); its hold lapses at ``held_until`` (Unix
    seconds), after which another worker may take it over.
    """

    blob: str
    version: int
    holder: str | None = None
    held_until: float | None = None


@dataclass(frozen=True)
class Fence:
    """A condition on a commit: the ledger record ``key`` is still at version ``token``.

    A lease is a ledger record whose version grows on every acquire, renewal and release; a
    worker that writes under its lease passes the version it last wrote as ``token``. The store
    checks it in the commit's own transaction (and keeps the record from changing until that
    transaction ends), so once another worker has taken the lease over, the old holder's commit
    is :class:`~agents_state_ext.errors.FencedOutError` and writes nothing.
    """

    key: str
    token: int


@runtime_checkable
class LedgerStore(Protocol):
    """Capability: a versioned ledger per key (a conversation id), written by compare-and-set.

    The ledger is independent of the graph tables: a bare ``ConversationState`` may keep its
    ledger under any key, created or not with ``create_conversation``; ``delete_conversation``
    also deletes the ledger under the same id.
    """

    async def get_ledger(self, key: str) -> LedgerRecord | None:
        """The stored ledger, ``None`` when none was ever written (or it was deleted)."""
        ...

    async def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        """Write the ledger only if its version is still ``expected_version``; the new version.

        ``expected_version`` 0 means "none stored yet". On a mismatch,
        ``ConcurrentUpdateError`` and nothing changes. The new version is
        ``expected_version + 1``.
        """
        ...

    async def delete_ledger(self, key: str) -> None:
        """Forget the ledger under ``key``; nothing happens when there is none."""
        ...


class LedgerHook(Protocol):
    """The slot of a run that saves its ledger before each request and after each answer."""

    checkpoint_hook: Callable[[], Awaitable[None]] | None


class LedgerValue(Protocol):
    """What :class:`~agents_state_ext.stores.HeldState` needs of a held state."""

    @property
    def strategy(self) -> str: ...

    @property
    def lifecycle(self) -> LedgerHook | None: ...

    def dumps_ledger(self) -> str: ...


class LedgerCodec(Protocol):
    """Reads a ledger's text back into a state (``ConversationState.loads_ledger``)."""

    def __call__(self, blob: str, *, client: AsyncOpenAI | None = None) -> Any: ...


_codec: list[LedgerCodec] = []


def use_ledger_codec(codec: LedgerCodec) -> None:
    """Make ``codec`` how held ledgers are read back (the state layer calls it on import)."""
    _codec[:] = [codec]


def ledger_codec() -> LedgerCodec:
    """The registered codec; ``RuntimeError`` when no state layer registered one."""
    if not _codec:
        raise RuntimeError("no ledger codec is registered: import agents_state_ext first")
    return _codec[0]
