"""The root of the exception tree and the store errors under it: import them from ``errors``.

They sit lowest (every store raises them), so the root lives here with them and
:mod:`agents_state_ext.errors`, which draws the whole tree, imports both without a cycle.
"""

from __future__ import annotations

__all__ = [
    "AttemptNotFoundError",
    "ConcurrentUpdateError",
    "ConversationBusyError",
    "ConversationNotFoundError",
    "FencedOutError",
    "LeaseLostError",
    "StateExtError",
    "StoreDataLostError",
    "StoreError",
    "StoreUnavailableError",
    "StoreValueError",
    "StoredDataError",
]


class StateExtError(Exception):
    """Root of every error agents-state-ext raises on purpose."""


class StoreError(StateExtError):
    """A conversation store could not do what was asked."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The store's backend could not be reached or did not answer in time: a transient failure.

    A refused or cut connection, a server restarting, a pool with no free connection, a
    statement or socket timeout. What was asked may or may not have been done (a commit cut
    after it was sent): read again before writing again. Retrying later is the remedy; the
    served app answers it as HTTP 503 with ``Retry-After``.
    """


class StoreValueError(StoreError, ValueError):
    """A value given to a store is one no backend can keep: refused before any write.

    Text that is not valid Unicode (a lone surrogate), a NUL character, a value JSON cannot
    hold, an id that is not non-empty text, a limit that is not a positive integer. The
    caller's mistake, not the store's: the served app answers it as HTTP 400 (and an answer of
    the model that holds such text as ``AnswerNotStored``, 502).
    """


class StoredDataError(StoreError):
    """What the store holds cannot be read back as the library wrote it (corrupt or missing).

    Not the caller's mistake and not transient: retrying reads the same data. The served app
    answers it as HTTP 500.
    """


class StoreDataLostError(StoredDataError):
    """The backend lost data it had acknowledged: a conversation it held is gone.

    Raised, for instance, by ``RedisStore`` when a Redis without persistence restarted under a
    running worker: the conversation asked for is missing and so is the mark the store left in
    that namespace when it first used it. The history is gone; nothing starts a new empty one
    under the same id.
    """


class ConcurrentUpdateError(StoreError):
    """A compare-and-set on a branch head lost: another writer moved the head first."""


class FencedOutError(ConcurrentUpdateError):
    """A commit's fence no longer holds: the writer lost the lease it wrote under.

    The ledger record the commit was conditioned on (:class:`~agents_state_ext.stores.Fence`)
    moved past the writer's token (another worker took the conversation over, or the lease was
    released), so nothing of the commit was written. Unlike a lost head compare-and-set, re-reading
    and retrying does not help: the writer must stop driving the conversation.
    """


class ConversationNotFoundError(StoreError, KeyError):
    """A conversation id that the store does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AttemptNotFoundError(StoreError, KeyError):
    """An attempt id that the conversation does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConversationBusyError(ConcurrentUpdateError):
    """Another live worker drives the conversation (HTTP 409); nothing was sent."""


class LeaseLostError(FencedOutError):
    """This worker's lease lapsed or was taken over while it held it: stop driving."""
