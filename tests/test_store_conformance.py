"""Every store passes the one conformance suite, and the suite catches a broken store."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from agents_state_ext.attempts import AttemptRecord
from agents_state_ext.nodes import Node
from agents_state_ext.stores import ConversationStore, InMemoryStore, SQLiteStore
from agents_state_ext.stores.conformance import (
    CHECKS,
    ConformanceError,
    StoreFactory,
    check_attempts,
    check_commit_is_atomic,
    run_conformance,
)


def sqlite_files(tmp_path: Path) -> StoreFactory:
    numbers = itertools.count()
    return lambda: SQLiteStore(tmp_path / f"store-{next(numbers)}.db")


BACKENDS: dict[str, Callable[[Path], StoreFactory]] = {
    "memory": lambda tmp_path: InMemoryStore,
    "sqlite-file": sqlite_files,
    "sqlite-memory": lambda tmp_path: SQLiteStore,
}


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_store_conformance(
    backend: str, check: Callable[[StoreFactory], None], tmp_path: Path
) -> None:
    check(BACKENDS[backend](tmp_path))


def test_run_conformance_runs_every_check(tmp_path: Path) -> None:
    run_conformance(InMemoryStore)
    run_conformance(sqlite_files(tmp_path))


class NoCompareAndSet(InMemoryStore):
    def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
    ) -> None:
        super().commit(
            conversation_id,
            nodes,
            expected_head=self.get_head(conversation_id),
            new_head=new_head,
        )


class NewestFirstAttempts(InMemoryStore):
    def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        return super().list_attempts(conversation_id, message_id=message_id)[::-1]


@pytest.mark.parametrize(
    ("store", "check"),
    [(NoCompareAndSet, check_commit_is_atomic), (NewestFirstAttempts, check_attempts)],
)
def test_the_suite_catches_a_broken_store(
    store: Callable[[], ConversationStore], check: Callable[[StoreFactory], None]
) -> None:
    with pytest.raises(ConformanceError):
        check(store)
    with pytest.raises(ConformanceError, match=check.__name__):
        run_conformance(store)
