"""The soak at its CI size: 4 uvicorn workers on PostgreSQL + Redis, the mock as its own
process, a seeded load with stops aimed at another worker, second drivers and a SIGKILLed
worker; every check of the store and the mock's transcripts must hold.

Skipped, saying why, without ``STATE_EXT_POSTGRES_URL`` and ``STATE_EXT_REDIS_URL`` (``.ci/run``
sets both). The full size is ``python -m soak`` (docs/serve.md, "Soak"); no timing is asserted.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from _backends import postgres_url, redis_url

from soak import SoakOptions, run_soak, summary
from soak.checks import Findings, percentile

CI_SIZE = SoakOptions(
    workers=4,
    conversations=8,
    seconds=8.0,
    kills=1,
    seed=11,
    lease_ttl=5.0,
    echo_delay=0.08,
    stop_share=0.6,
)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    postgres, redis = postgres_url(), redis_url()
    seed = int(os.environ.get("STATE_EXT_SOAK_SEED", CI_SIZE.seed))
    options = SoakOptions(
        **{**CI_SIZE.__dict__, "seed": seed, "postgres_url": postgres, "redis_url": redis}
    )
    return run_soak(options)


def test_every_check_holds(report: dict[str, Any]) -> None:
    failed = {name: check for name, check in report["checks"].items() if not check["ok"]}
    assert not failed, summary(report)


def test_the_load_did_what_the_soak_is_for(report: dict[str, Any]) -> None:
    """Answers were accepted, stopped from another worker and stored as stopped, a worker was
    killed and restarted, and every conversation's state was read back from the store."""
    assert report["conversations"] == CI_SIZE.conversations
    assert report["accepted"].get("send", 0) > 0, summary(report)
    assert report["stops"]["stored_status"].get("cancelled", 0) > 0, summary(report)
    assert report["killed_workers"] == CI_SIZE.kills
    assert report["restarts"] == CI_SIZE.kills
    assert report["store"]["attempts"] > 0 and report["store"]["stored_responses"] > 0


def test_each_check_reports_what_breaks_it() -> None:
    findings = Findings()
    assert all(check["ok"] for check in findings.checks().values())
    findings.lost_writes.append("c1 send: 0 user nodes")
    findings.non_final.append("c1/a1: record streaming")
    checks = findings.checks()
    assert not checks["zero_lost_writes"]["ok"] and checks["zero_lost_writes"]["found"] == 1
    assert not checks["zero_non_final_attempts"]["ok"]
    assert checks["zero_duplicated_items"]["ok"] and checks["every_graph_consistent"]["ok"]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(n) for n in range(1, 101)], 0.99) == 99.0
