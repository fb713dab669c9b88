"""The interruption matrix: every point of seven scripted runs, every way a run can end early,
every way to go on, under both server strategies, streamed and not; and the checkpoint cells of
an approval pause with a late user message staged on its RunState (issue 29 item 4).

One test per (script, strategy, streamed, way, continuation) loops over the script's points
(enumerated from an uninterrupted run) and reports every failing point at once, grouped by
problem. The session ends with the number of cells run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from agents_state_ext.testing import MockResponsesAPI

from ._continue import CONTINUATIONS
from ._interrupt import WAYS
from ._matrix import Cell, enumerate_points, run_point
from ._report import PLUGIN_NAME, Tally, render
from ._scripts import SCRIPTS
from ._support import STREAMED
from ._talk import STRATEGIES, fewer_collections

pytestmark = [
    pytest.mark.anyio,
    # Closing the open calls an interrupted run left is the ledger's documented repair (it
    # warns); whether the repaired transcript is sound is what the cells judge.
    pytest.mark.filterwarnings("ignore::agents_state_ext.InterruptedToolCallWarning"),
]


@pytest.fixture(scope="session")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """Counts over all matrix tests, printed at the end of the session."""
    counts = Tally()
    request.config.pluginmanager.register(counts, PLUGIN_NAME)
    yield counts


@pytest.fixture(scope="module", autouse=True)
def fast_collector() -> Iterator[None]:
    """Thousands of runs: fewer garbage-collector passes while this module runs."""
    with fewer_collections():
        yield


@pytest.fixture(autouse=True)
def quiet_sdk(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logs every failed stream with its traceback: thousands of expected ones here."""
    caplog.set_level(logging.CRITICAL, logger="openai.agents")


@pytest.mark.parametrize("continuation", list(CONTINUATIONS))
@pytest.mark.parametrize("way", [name for name, way in WAYS.items() if way.in_matrix])
@STREAMED
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("script", list(SCRIPTS))
async def test_every_point_continues_soundly(
    mock: MockResponsesAPI,
    tally: Tally,
    script: str,
    strategy: str,
    streamed: bool,
    way: str,
    continuation: str,
) -> None:
    """At every point of the script, this way of stopping and of going on stays sound."""
    cell = Cell(SCRIPTS[script], strategy, streamed, WAYS[way], CONTINUATIONS[continuation])
    reason = cell.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    outcomes = [await run_point(mock, cell, p) for p in await enumerate_points(mock, cell)]
    tally.add(cell, outcomes)
    if any(o.problems for o in outcomes):
        pytest.fail(render(cell, outcomes), pytrace=False)
