"""The conformance suite every store must pass, whatever its backend.

Each check is ``async def check_x(factory)``: ``factory`` is an async callable returning a new,
empty store, and the check closes every store it opens. The checks come in three groups:

- ``CORE_CHECKS``: the :class:`~agents_state_ext.stores.ConversationStore` protocol.
- ``LEDGER_CHECKS``: the :class:`~agents_state_ext.stores.LedgerStore` capability.
- ``TOKEN_CHECKS``: the :class:`~agents_state_ext.stores.TokenCountStore` capability.

``CHECKS`` is all three. ``NETWORK_CHECKS`` (``check_unavailable_when_cut``) are for stores
over a network: each takes an :class:`Outage` too, which cuts the stores' connection to their
server (a TCP proxy in front of it, for instance), and checks that every call is then
``StoreUnavailableError`` and that the store heals once the line is back;
``run_conformance(factory, outage=...)`` runs them after the others.

A capability check given a store without that capability passes by skipping: it raises
:class:`ConformanceSkip` (so a test runner can show it as skipped), and :func:`run_conformance`
lists it under ``skipped`` in its report. In pytest, one test per
check (with the ``anyio`` plugin, as this project runs them)::

    import pytest
    from agents_state_ext.stores.conformance import CHECKS, ConformanceSkip

    async def make_store():
        return await MyStore.connect(...)

    @pytest.mark.anyio
    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
    async def test_my_store(check):
        try:
            await check(make_store)
        except ConformanceSkip as skip:
            pytest.skip(str(skip))

or all at once: ``await run_conformance(make_store)`` raises :class:`ConformanceError` naming
every failed check. Checks use no ``assert``, so they also run under ``python -O``.

The checks live in ``core``, ``commits`` and ``records`` (the core), ``ledger``, ``tokens`` and
``outages``;
this module puts them in order and runs them.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from ...errors import ConformanceError, ConformanceSkip
from ._support import (
    Check,
    ConformanceReport,
    StoreFactory,
    sample_graph,
)
from .commits import (
    check_commit_attempts,
    check_commit_is_atomic,
    check_concurrent_commits,
    check_delete_conversation,
    check_head_compare_and_set,
    check_orphan_parent_refused,
)
from .core import (
    check_active_path,
    check_active_path_limit,
    check_conversations,
    check_cycles,
    check_isolation,
    check_load_graph,
    check_nodes,
    check_protocol,
    check_typed_ids,
    check_unknown_conversation,
)
from .ledger import (
    check_fence_against_takeover,
    check_fenced_commit,
    check_ledger_concurrent_writers,
    check_ledger_delete,
    check_ledger_typed_ids,
    check_ledger_versions,
)
from .outages import Outage, OutageCheck, check_unavailable_when_cut
from .records import check_attempts, check_close, check_run_states
from .tokens import check_token_counts, check_token_typed_ids

__all__ = [
    "CHECKS",
    "CORE_CHECKS",
    "LEDGER_CHECKS",
    "NETWORK_CHECKS",
    "TOKEN_CHECKS",
    "Check",
    "ConformanceError",
    "ConformanceReport",
    "ConformanceSkip",
    "Outage",
    "OutageCheck",
    "StoreFactory",
    "run_conformance",
    "sample_graph",
]


CORE_CHECKS: tuple[Check, ...] = (
    check_protocol,
    check_conversations,
    check_unknown_conversation,
    check_nodes,
    check_isolation,
    check_load_graph,
    check_active_path,
    check_active_path_limit,
    check_head_compare_and_set,
    check_commit_is_atomic,
    check_orphan_parent_refused,
    check_commit_attempts,
    check_concurrent_commits,
    check_delete_conversation,
    check_cycles,
    check_typed_ids,
    check_attempts,
    check_run_states,
    check_close,
)
LEDGER_CHECKS: tuple[Check, ...] = (
    check_ledger_versions,
    check_ledger_delete,
    check_ledger_concurrent_writers,
    check_ledger_typed_ids,
    check_fenced_commit,
    check_fence_against_takeover,
)
TOKEN_CHECKS: tuple[Check, ...] = (check_token_counts, check_token_typed_ids)
CHECKS: tuple[Check, ...] = CORE_CHECKS + LEDGER_CHECKS + TOKEN_CHECKS
NETWORK_CHECKS: tuple[OutageCheck, ...] = (check_unavailable_when_cut,)


async def run_conformance(
    factory: StoreFactory, *, outage: Outage | None = None
) -> ConformanceReport:
    """Run every check; raise ConformanceError listing each one that failed.

    With ``outage``, the ``NETWORK_CHECKS`` too. Returns what passed and what was skipped
    (capability checks on a store without them).
    """
    passed: list[str] = []
    skipped: dict[str, str] = {}
    failures: list[str] = []
    checks: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        (check.__name__, functools.partial(check, factory)) for check in CHECKS
    ]
    if outage is not None:
        checks += [(c.__name__, functools.partial(c, factory, outage)) for c in NETWORK_CHECKS]
    for name, check in checks:
        try:
            await check()
        except ConformanceSkip as skip:
            skipped[name] = str(skip)
        except Exception as exc:
            failures.append(f"{name}: {exc!r}")
        else:
            passed.append(name)
    if failures:
        raise ConformanceError("store failed conformance:\n" + "\n".join(failures))
    return ConformanceReport(tuple(passed), skipped)
