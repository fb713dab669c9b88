"""``run_soak``: start the cluster, drive it, check the store and the mock, and report."""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

from agents_state_ext.stores.postgres import PostgresStore

from .checks import Findings, check_mock, check_store, percentile
from .cluster import Cluster
from .load import LoadDriver, Tally

__all__ = ["POSTGRES_ENV", "REDIS_ENV", "SoakOptions", "run_soak", "summary"]

_PATH = re.compile(r"(?:/[\w.\-]+){2,}")  # file paths in worker tracebacks stay out of reports

POSTGRES_ENV = "STATE_EXT_POSTGRES_URL"
REDIS_ENV = "STATE_EXT_REDIS_URL"


@dataclass(frozen=True)
class SoakOptions:
    """The size and knobs of one soak run."""

    workers: int = 4
    conversations: int = 40
    seconds: float = 120.0
    kills: int = 8
    seed: int = 1
    echo_delay: float = 0.05
    """The mock's seconds between streamed words (an answer is about a dozen words)."""
    lease_ttl: float = 5.0
    stop_share: float = 0.35
    clash_share: float = 0.1
    keep_schema: bool = False
    """Leave the run's PostgreSQL schema in place (to look into a failed check)."""
    postgres_url: str | None = None
    """Default: ``STATE_EXT_POSTGRES_URL``."""
    redis_url: str | None = None
    """Default: ``STATE_EXT_REDIS_URL``."""


def _services(options: SoakOptions) -> tuple[str, str]:
    postgres = options.postgres_url or os.environ.get(POSTGRES_ENV)
    redis = options.redis_url or os.environ.get(REDIS_ENV)
    if not postgres or not redis:
        raise RuntimeError(
            f"the soak needs PostgreSQL and Redis: set {POSTGRES_ENV} and {REDIS_ENV}"
        )
    return postgres, redis


def run_soak(options: SoakOptions) -> dict[str, Any]:
    """Run one soak; its report (``report["ok"]``: every check holds)."""
    postgres, redis = _services(options)
    if options.workers < 2:
        raise ValueError("the soak needs at least 2 workers (a stop goes to another one)")
    phases: dict[str, float] = {}
    clock = time.monotonic()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        phases[name] = round(now - clock, 1)
        clock = now

    with Cluster(
        postgres_url=postgres,
        redis_url=redis,
        workers=options.workers,
        echo_delay=options.echo_delay,
        lease_ttl=options.lease_ttl,
        keep_schema=options.keep_schema,
    ) as cluster:
        phase("start")
        driver = LoadDriver(
            cluster,
            conversations=options.conversations,
            seconds=options.seconds,
            kills=options.kills,
            seed=options.seed,
            stop_share=options.stop_share,
            clash_share=options.clash_share,
        )
        tally = asyncio.run(driver.run())
        phase("load_and_final_pass")
        findings = Findings()
        asyncio.run(_check_store(postgres, cluster.schema, tally, findings))
        check_mock(cluster.mock, findings)
        phase("checks")
        log_lines = cluster.logs().splitlines()
        restarts = sum(w.starts - 1 for w in cluster.workers)
    phase("stop")
    return _report(options, tally, findings, log_lines, restarts, phases)


async def _check_store(postgres: str, schema: str, tally: Tally, findings: Findings) -> None:
    store = await PostgresStore.connect(postgres, schema=schema)
    try:
        await check_store(store, tally, findings)
    finally:
        await store.aclose()


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _report(
    options: SoakOptions,
    tally: Tally,
    findings: Findings,
    log_lines: list[str],
    restarts: int,
    phases: dict[str, float],
) -> dict[str, Any]:
    stops = tally.stops
    checks = findings.checks()
    answered = [s for s in stops if s.status == 200 and s.returned_after is not None]
    return {
        "ok": all(check["ok"] for check in checks.values()),
        "options": {k: v for k, v in asdict(options).items() if not k.endswith("_url")},
        "elapsed_seconds": round(sum(phases.values()), 1),
        "phase_seconds": phases,
        "requests": tally.requests,
        "conversations": len(tally.conversations),
        "answers": dict(sorted(tally.answers.items())),
        "accepted": _count(a.kind for a in tally.accepted),
        "conflicts_409": tally.conflicts,
        "clashes": tally.clashes,
        "stops": {
            "sent": len(stops),
            "by_status": _count(str(s.status) for s in stops),
            "stored_status": dict(findings.stopped_statuses),
            "live_worker": _latencies(
                [s.returned_after or 0.0 for s in answered if s.answer.final is not None],
                [latency for latency, live in findings.stored_stop_latencies if live],
            ),
            "killed_worker": _latencies(
                [s.returned_after or 0.0 for s in answered if s.answer.final is None],
                [latency for latency, live in findings.stored_stop_latencies if not live],
            ),
        },
        "killed_workers": len(tally.kills),
        "kills": tally.kills,
        "restarts": restarts,
        "streams_cut": tally.cut_streams,
        "final_pass": dict(tally.final_pass),
        "store": dict(findings.counts),
        "checks": checks,
        "worker_log_lines": len(log_lines),
        "worker_log_sample": [_PATH.sub("<path>", line) for line in log_lines[:20]],
    }


def _latencies(returned: list[float], stored: list[float]) -> dict[str, Any]:
    """p50 / p99 / max of the seconds until a stop was answered and until it was stored."""
    return {
        "count": len(returned),
        "answered_p50": _seconds(percentile(returned, 0.5)),
        "answered_p99": _seconds(percentile(returned, 0.99)),
        "answered_max": _seconds(max(returned, default=None)),
        "stored_p50": _seconds(percentile(stored, 0.5)),
        "stored_p99": _seconds(percentile(stored, 0.99)),
        "stored_max": _seconds(max(stored, default=None)),
    }


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def _stop_line(what: str, figures: dict[str, Any]) -> str:
    return (
        f"  {figures['count']} stops, streaming worker {what.split('_')[0]}: answered p50 "
        f"{figures['answered_p50']} s p99 {figures['answered_p99']} s, stored p50 "
        f"{figures['stored_p50']} s p99 {figures['stored_p99']} s"
    )


def summary(report: dict[str, Any]) -> str:
    """A few lines a person reads: the load, the stops, the kills, each check."""
    stops = report["stops"]
    options = report["options"]
    lines = [
        f"soak: {options['workers']} workers, {report['conversations']} conversations, "
        f"{options['seconds']:g} s, seed {options['seed']} "
        f"({report['elapsed_seconds']} s in all: {report['phase_seconds']})",
        f"requests {report['requests']}, accepted {report['accepted']}, "
        f"409 conflicts {report['conflicts_409']} (clashes sent {report['clashes']})",
        f"stops {stops['sent']} {stops['by_status']} stored as {stops['stored_status']}",
        *(_stop_line(what, stops[what]) for what in ("live_worker", "killed_worker")),
        f"killed workers {report['killed_workers']}, streams cut {report['streams_cut']}, "
        f"final pass {report['final_pass']}",
    ]
    for name, check in report["checks"].items():
        mark = "ok  " if check["ok"] else "FAIL"
        lines.append(f"{mark} {name}: {check['found']} found")
        lines += [f"       {example}" for example in check["examples"]]
    return "\n".join(lines)
