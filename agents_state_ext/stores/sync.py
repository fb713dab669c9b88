"""SyncStore: any async store, usable from synchronous code (the CLI, scripts, a notebook cell).

::

    with SyncStore(SQLiteStore("chat.db")) as store:
        print(store.list_conversations())

    with SyncStore.open("postgresql://localhost/app") as store:  # connects on its own loop
        graph = store.load_graph("chat_1")

The store runs on a private event loop in a background thread; each method runs the store's
coroutine there and waits for it. That also works from inside a running event loop (the
caller's loop is blocked meanwhile), but async code should await the store directly.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import StoreError
from .base import (
    ConversationInfo,
    ConversationStore,
    Fence,
    LedgerRecord,
    LedgerStore,
    TokenCountStore,
)

__all__ = ["SyncStore"]

_T = TypeVar("_T")


class _LoopThread:
    """An event loop running forever on a daemon thread, until ``stop``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="agents-state-ext-sync-store", daemon=True
        )
        self.thread.start()

    def run(self, call: Callable[[], Awaitable[_T]]) -> _T:
        if threading.current_thread() is self.thread:
            raise StoreError("a SyncStore cannot be called from its own event loop")

        async def invoke() -> _T:
            return await call()

        future = asyncio.run_coroutine_threadsafe(invoke(), self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # an interrupted caller (Ctrl-C) stops the call too
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class SyncStore:
    """Synchronous methods over an async store, run on a private loop in a background thread.

    Every method of the core protocol and of both capabilities is here, typed; a capability
    method on a store without it is ``StoreError``. Errors are the store's own. ``close()`` (or
    leaving the ``with`` block) closes the wrapped store and stops the thread; after it, every
    call is ``StoreError``.

    A store whose connections belong to an event loop (PostgreSQL, Redis) must be created on
    this one: use :meth:`open` rather than wrapping a store connected elsewhere.
    """

    def __init__(self, store: ConversationStore) -> None:
        self._setup(store, _LoopThread())

    @classmethod
    def open(cls, url: str | os.PathLike[str], **options: Any) -> SyncStore:
        """Open ``open_store(url, **options)`` on the private loop, and wrap it."""
        from .urls import open_store

        runner = _LoopThread()
        try:
            store = runner.run(lambda: open_store(url, **options))
        except BaseException:
            runner.stop()
            raise
        self = cls.__new__(cls)
        self._setup(store, runner)
        return self

    def _setup(self, store: ConversationStore, runner: _LoopThread) -> None:
        self._store = store
        self._runner = runner
        self._closed = False

    @property
    def store(self) -> ConversationStore:
        """The wrapped async store."""
        return self._store

    def _run(self, call: Callable[[], Awaitable[_T]]) -> _T:
        if self._closed:
            raise StoreError("the store is closed")
        return self._runner.run(call)

    def _ledger(self) -> LedgerStore:
        if not isinstance(self._store, LedgerStore):
            raise StoreError("this store has no ledger capability")
        return self._store

    def _tokens(self) -> TokenCountStore:
        if not isinstance(self._store, TokenCountStore):
            raise StoreError("this store has no token-count capability")
        return self._store

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the wrapped store and stop the loop's thread; calling it twice is fine."""
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self._store.aclose)
        finally:
            self._runner.stop()

    def __enter__(self) -> SyncStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- conversations -----------------------------------------------------------------------

    def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        """See :meth:`ConversationStore.create_conversation`."""
        self._run(
            lambda: self._store.create_conversation(conversation_id, strategy=strategy, meta=meta)
        )

    def get_conversation(self, conversation_id: str) -> ConversationInfo:
        """See :meth:`ConversationStore.get_conversation`."""
        return self._run(lambda: self._store.get_conversation(conversation_id))

    def list_conversations(self) -> list[str]:
        """See :meth:`ConversationStore.list_conversations`."""
        return self._run(self._store.list_conversations)

    def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        """See :meth:`ConversationStore.update_conversation_meta`."""
        self._run(lambda: self._store.update_conversation_meta(conversation_id, meta))

    def delete_conversation(self, conversation_id: str) -> None:
        """See :meth:`ConversationStore.delete_conversation`."""
        self._run(lambda: self._store.delete_conversation(conversation_id))

    # -- nodes and heads ---------------------------------------------------------------------

    def get_node(self, conversation_id: str, node_id: str) -> Node:
        """See :meth:`ConversationStore.get_node`."""
        return self._run(lambda: self._store.get_node(conversation_id, node_id))

    def load_graph(self, conversation_id: str) -> ConversationGraph:
        """See :meth:`ConversationStore.load_graph`."""
        return self._run(lambda: self._store.load_graph(conversation_id))

    def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        """See :meth:`ConversationStore.active_path`."""
        return self._run(lambda: self._store.active_path(conversation_id, leaf_id, limit=limit))

    def get_head(self, conversation_id: str) -> str | None:
        """See :meth:`ConversationStore.get_head`."""
        return self._run(lambda: self._store.get_head(conversation_id))

    def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
        fence: Fence | None = None,
    ) -> None:
        """See :meth:`ConversationStore.commit` (``fence`` is passed only when given)."""
        extra: dict[str, Fence] = {} if fence is None else {"fence": fence}
        self._run(
            lambda: self._store.commit(
                conversation_id,
                nodes,
                expected_head=expected_head,
                new_head=new_head,
                attempts=attempts,
                **extra,
            )
        )

    # -- attempts and paused runs ------------------------------------------------------------

    def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        """See :meth:`ConversationStore.put_attempt`."""
        self._run(lambda: self._store.put_attempt(conversation_id, record))

    def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        """See :meth:`ConversationStore.get_attempt`."""
        return self._run(lambda: self._store.get_attempt(conversation_id, attempt_id))

    def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        """See :meth:`ConversationStore.list_attempts`."""
        return self._run(lambda: self._store.list_attempts(conversation_id, message_id=message_id))

    def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        """See :meth:`ConversationStore.put_run_state`."""
        self._run(lambda: self._store.put_run_state(conversation_id, attempt_id, blob))

    def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        """See :meth:`ConversationStore.get_run_state`."""
        return self._run(lambda: self._store.get_run_state(conversation_id, attempt_id))

    def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        """See :meth:`ConversationStore.delete_run_state`."""
        self._run(lambda: self._store.delete_run_state(conversation_id, attempt_id))

    # -- ledger (capability) -----------------------------------------------------------------

    def get_ledger(self, key: str) -> LedgerRecord | None:
        """See :meth:`LedgerStore.get_ledger`; ``StoreError`` without the capability."""
        ledger = self._ledger()
        return self._run(lambda: ledger.get_ledger(key))

    def put_ledger(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        """See :meth:`LedgerStore.put_ledger`; ``StoreError`` without the capability."""
        ledger = self._ledger()
        return self._run(
            lambda: ledger.put_ledger(
                key, blob, expected_version=expected_version, holder=holder, held_until=held_until
            )
        )

    def delete_ledger(self, key: str) -> None:
        """See :meth:`LedgerStore.delete_ledger`; ``StoreError`` without the capability."""
        ledger = self._ledger()
        self._run(lambda: ledger.delete_ledger(key))

    # -- token counts (capability) -----------------------------------------------------------

    def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        """See :meth:`TokenCountStore.put_token_counts`; ``StoreError`` without the capability."""
        tokens = self._tokens()
        self._run(lambda: tokens.put_token_counts(conversation_id, encoding, counts))

    def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        """See :meth:`TokenCountStore.get_token_counts`; ``StoreError`` without the capability."""
        tokens = self._tokens()
        return self._run(lambda: tokens.get_token_counts(conversation_id, encoding, node_ids))
