"""The seeded fault campaign: random conversations, several interruptions each, one verdict.

``STATE_EXT_CAMPAIGN_SEQUENCES`` sets how many plans run (default 150, seeds 1..N);
``STATE_EXT_CAMPAIGN_SEED`` replays one seed. The long run:
``STATE_EXT_CAMPAIGN_SEQUENCES=10000 python -m pytest -m campaign -s``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from agents_state_ext.testing import MockResponsesAPI

from ._campaign import Tally, draw, run_plan
from ._report import SESSION_SUMMARY
from ._talk import fewer_collections

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.campaign,
    # The ledger's documented repair of open calls warns; the verdict judges its result.
    pytest.mark.filterwarnings("ignore::agents_state_ext.InterruptedToolCallWarning"),
]

DEFAULT_SEQUENCES = 150


def seeds() -> list[int]:
    """The seeds to play: one replayed seed, or 1..STATE_EXT_CAMPAIGN_SEQUENCES."""
    replay = os.environ.get("STATE_EXT_CAMPAIGN_SEED")
    if replay:
        return [int(replay)]
    count = int(os.environ.get("STATE_EXT_CAMPAIGN_SEQUENCES", DEFAULT_SEQUENCES))
    return list(range(1, count + 1))


@pytest.fixture(autouse=True)
def fast_collector() -> Iterator[None]:
    """Hundreds of runs: fewer garbage-collector passes while the campaign runs."""
    with fewer_collections():
        yield


async def test_random_fault_sequences_keep_every_conversation_sound(
    mock: MockResponsesAPI, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> None:
    caplog.set_level(logging.CRITICAL, logger="openai.agents")
    tally = Tally()
    for seed in seeds():
        tally.add(await run_plan(mock, draw(seed)))
    # Printed at the session's end by integration/conftest.py, also from a pytest-xdist worker
    # (whose own output, even with -s, nobody sees).
    request.node.user_properties.append((SESSION_SUMMARY, tally.summary()))
    if tally.failed:
        pytest.fail(f"{tally.summary()}\n{tally.failures()}", pytrace=False)
