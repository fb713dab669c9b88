"""The soak's fault mode: chats on a PostgreSQL and a Redis of its own while they fail (issue 33).

``python -m soak.faults --chats 8 --turns 12`` starts a PostgreSQL and a redis-server of its own
(:mod:`soak.outage`: temporary directories, free ports, never the machine's services), each
behind a :class:`~soak.outage.FaultProxy`, and runs every scenario of :data:`SCENARIOS` in turn.
In each, ``chats`` chats (one per strategy, round robin; chat layer, ``PostgresStore`` or
``RedisStore`` through the proxy, streamed and not) each make at least ``turns`` actions that
get through, and go on until the scenario's ``faults`` kills, restarts, cuts or blackholes (or
its slow spell) are over; then the fault ends and :mod:`.fault_checks` reads every chat
back with a fresh handle, and the same store object must answer a new chat (it heals by
itself). The report counts, per scenario, actions, faults, errors by type and violations per
check; ``ok`` when there are none. ``tests/test_soak_faults.py`` runs a small size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents import Agent, set_tracing_disabled

from agents_state_ext import open_conversation
from agents_state_ext.stores import ConversationStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI

from .fault_checks import CHECKS, check_chats
from .fault_load import ChatLog, drive
from .outage import FaultProxy, Postgres, Redis

__all__ = ["SCENARIOS", "FaultOptions", "run_faults", "summary"]

STRATEGIES = ("replay", "previous_response", "session", "conversation")
UP = 0.3
SETTLE = 2.5  # seconds from the fault's end to the checks: a handle tries a failed end again
# in the background every 2 s at most (see agents_state_ext/chat/writes.py)
RESULTS = Path(__file__).parent / "results" / "faults.json"


@dataclass(frozen=True)
class FaultOptions:
    """The size and knobs of one fault soak run."""

    chats: int = 8
    turns: int = 12
    seed: int = 1
    timeout: float = 3.0
    """The stores' statement / socket timeout, in seconds (a blackhole costs about this; a
    commit is several round trips, each slowed by the delay both ways)."""
    blackhole: float = 2.0
    """Seconds each blackhole lasts."""
    delay: float = 0.1
    """Seconds the slow network adds to each chunk, each way (0.1: 200 ms a round trip)."""
    faults: int = 6
    """At most this many kills, restarts, cuts or blackholes per scenario (the load may end
    first); the store is up at least :data:`UP` seconds between two."""
    scenarios: tuple[str, ...] = ()
    """Names from :data:`SCENARIOS` (default: all)."""


@dataclass
class Rig:
    """The servers, their proxies and the run's options, for the fault injectors."""

    postgres: Postgres
    redis: Redis
    pg_proxy: FaultProxy
    redis_proxy: FaultProxy
    options: FaultOptions
    rng: random.Random


Injector = Callable[[Rig, asyncio.Event], Awaitable[int]]


async def _until(done: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` or until ``done``; whether the load is done."""
    try:
        await asyncio.wait_for(done.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def pg_kill_mid_commit(rig: Rig, done: asyncio.Event) -> int:
    """SIGKILL PostgreSQL after a ``COMMIT`` reached it, before its answer is back; restart."""
    kills = 0
    while kills < rig.options.faults and not done.is_set():
        held = asyncio.ensure_future(rig.pg_proxy.lose_reply_to(b"COMMIT\x00").wait())
        finished = asyncio.ensure_future(done.wait())
        await asyncio.wait({held, finished}, return_when=asyncio.FIRST_COMPLETED)
        held.cancel()
        finished.cancel()
        if not rig.pg_proxy.held.is_set():
            break
        await asyncio.to_thread(rig.postgres.kill)
        await asyncio.to_thread(rig.postgres.start)
        kills += 1
        if await _until(done, UP + rig.rng.random() * 0.5):
            break
    rig.pg_proxy.lose_reply_to(b"\x00never")
    return kills


async def _kills(rig: Rig, done: asyncio.Event, kill: Callable[[], None]) -> int:
    """``kill`` the server at random moments under the load, down a moment, then start it."""
    count = 0
    while count < rig.options.faults and not await _until(done, UP + rig.rng.random() * 0.5):
        await asyncio.to_thread(kill)
        await asyncio.sleep(rig.rng.random() * 0.3)
        await asyncio.to_thread(rig.postgres.start)
        count += 1
    return count


async def pg_kill(rig: Rig, done: asyncio.Event) -> int:
    """``kill -9`` at random moments, the server down a moment, then started again."""
    return await _kills(rig, done, rig.postgres.kill)


async def pg_restart(rig: Rig, done: asyncio.Event) -> int:
    """``pg_ctl restart -m fast`` at random moments."""
    count = 0
    while count < rig.options.faults and not await _until(done, UP + rig.rng.random() * 0.5):
        await asyncio.to_thread(rig.postgres.restart)
        count += 1
    return count


async def _cuts(proxy: FaultProxy, rig: Rig, done: asyncio.Event) -> int:
    count = 0
    while count < rig.options.faults * 3 and not await _until(done, 0.05 + rig.rng.random() * 0.25):
        proxy.cut()
        count += 1
    return count


async def _blackholes(proxy: FaultProxy, rig: Rig, done: asyncio.Event) -> int:
    count = 0
    while count < max(1, rig.options.faults // 3) and not await _until(done, UP + rig.rng.random()):
        proxy.blackhole()
        await asyncio.sleep(rig.options.blackhole)
        proxy.heal()
        proxy.cut()  # the blackholed connections hold half-answered requests
        count += 1
    return count


async def _slow(proxy: FaultProxy, rig: Rig, done: asyncio.Event) -> int:
    """A slow network for about a second per fault of the run's size."""
    proxy.delay = rig.options.delay
    await _until(done, float(rig.options.faults))
    proxy.delay = 0.0
    return 1


async def redis_kill_restart(rig: Rig, done: asyncio.Event) -> int:
    """Kill redis-server once under the load and start it with nothing: its data is gone."""
    if await _until(done, 0.3):
        return 0
    await asyncio.to_thread(rig.redis.kill)
    await asyncio.to_thread(rig.redis.start)
    return 1


SCENARIOS: dict[str, tuple[str, Injector]] = {
    "pg_kill_mid_commit": ("postgres", pg_kill_mid_commit),
    "pg_kill": ("postgres", pg_kill),
    "pg_restart_fast": ("postgres", pg_restart),
    "pg_cut": ("postgres", lambda rig, done: _cuts(rig.pg_proxy, rig, done)),
    "pg_blackhole": ("postgres", lambda rig, done: _blackholes(rig.pg_proxy, rig, done)),
    "pg_delay": ("postgres", lambda rig, done: _slow(rig.pg_proxy, rig, done)),
    "redis_cut": ("redis", lambda rig, done: _cuts(rig.redis_proxy, rig, done)),
    "redis_kill_restart": ("redis", redis_kill_restart),
    "redis_blackhole": ("redis", lambda rig, done: _blackholes(rig.redis_proxy, rig, done)),
    "redis_delay": ("redis", lambda rig, done: _slow(rig.redis_proxy, rig, done)),
}
"""Scenario name -> (the store it hits, the fault). Issue 33's items: 0 and 2 (kills, restarts
and cuts mid-commit), 1 (every failure typed), 3 (Redis cut and restarted: the store heals),
4 (Redis restarted without persistence: ``StoreDataLostError``)."""


async def _store(rig: Rig, backend: str) -> ConversationStore:
    timeout = rig.options.timeout
    if backend == "postgres":
        from agents_state_ext.stores.postgres import PostgresStore

        url = rig.pg_proxy.proxied(rig.postgres.url)
        return await PostgresStore.connect(
            url, max_size=8, timeout=max(2.0, timeout * 2), statement_timeout=timeout
        )
    from agents_state_ext.stores.redis import RedisStore

    url = rig.redis_proxy.proxied(rig.redis.url)
    return await RedisStore.connect(url, socket_timeout=timeout, socket_connect_timeout=timeout)


async def _scenario(rig: Rig, name: str) -> dict[str, Any]:
    backend, inject = SCENARIOS[name]
    options = rig.options
    started = time.monotonic()
    store = await _store(rig, backend)
    async with MockResponsesAPI() as mock:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
        chat_options: dict[str, Any] = {"agent": agent, "counter": FixedTokenCounter()}
        chats, logs = [], []
        for i in range(options.chats):
            strategy = STRATEGIES[i % len(STRATEGIES)]
            chat = await open_conversation(
                store,
                strategy=strategy,  # type: ignore[arg-type]
                system="be brief",
                **chat_options,
            )
            chats.append(chat)
            logs.append(ChatLog(chat.id, strategy))
        done = asyncio.Event()
        injecting = asyncio.ensure_future(inject(rig, done))
        seeds = [options.seed * 1000 + i for i in range(options.chats)]
        try:
            await asyncio.gather(
                *(
                    drive(c, log, options.turns, s, chat_options, until=injecting)
                    for c, log, s in zip(chats, logs, seeds, strict=True)
                )
            )
        finally:
            done.set()
            faults = await injecting
        loaded = time.monotonic()
        rig.pg_proxy.heal()
        rig.redis_proxy.heal()
        if any(log.errors for log in logs):  # else no handle has anything left to store
            await asyncio.sleep(SETTLE)
        said_lost: list[str] = []
        found = await check_chats(store, logs, mock, chat_options, said_lost)
        found["heals"] = await _heals(store, chat_options)
    await store.aclose()
    errors: Counter[str] = Counter()
    for log in logs:
        errors.update(log.errors)
    return {
        "store": backend,
        "chats": len(logs),
        "actions": sum(log.actions for log in logs),
        "answered": sum(len(log.answered) for log in logs),
        "handles_opened": sum(log.handles for log in logs),
        "lost_chats": sum(log.lost for log in logs),
        "lost_on_reopen": len(said_lost),
        "faults": faults,
        "errors": dict(sorted(errors.items())),
        "violations": {check: len(wrong) for check, wrong in found.items()},
        "examples": {check: wrong[:5] for check, wrong in found.items() if wrong},
        "seconds": {
            "load": round(loaded - started, 1),
            "total": round(time.monotonic() - started, 1),
        },
    }


async def _heals(store: ConversationStore, chat_options: dict[str, Any]) -> list[str]:
    """The same store object, the fault over: a new chat is answered (violations, if not)."""
    try:
        chat = await open_conversation(store, strategy="replay", **chat_options)
        answer = await chat.send("after the fault")
    except Exception as exc:  # any failure here is the finding
        return [f"{type(exc).__name__}: {exc}"]
    return [] if answer.status == "complete" else [f"answered {answer.status}"]


async def _run(
    options: FaultOptions, rig: Rig, progress: Callable[[str, dict[str, Any]], None] | None
) -> dict[str, Any]:
    rig.pg_proxy = await FaultProxy(rig.postgres.port).start()
    rig.redis_proxy = await FaultProxy(rig.redis.port).start()
    scenarios: dict[str, Any] = {}
    try:
        for name in options.scenarios or SCENARIOS:
            scenarios[name] = await _scenario(rig, name)
            if progress is not None:
                progress(name, scenarios[name])
        return scenarios
    finally:
        await rig.pg_proxy.aclose()
        await rig.redis_proxy.aclose()


def run_faults(
    options: FaultOptions, progress: Callable[[str, dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Run every scenario once; the report (``report["ok"]``: no violation in any).

    ``progress(name, scenario_report)`` is called as each scenario ends.
    """
    unknown = set(options.scenarios) - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenarios: {sorted(unknown)} (known: {list(SCENARIOS)})")
    set_tracing_disabled(True)
    started = time.monotonic()
    postgres = Postgres()
    with tempfile.TemporaryDirectory(prefix="state-ext-redis-") as redis_dir:
        redis = Redis(Path(redis_dir))
        try:
            postgres.start()
            redis.start()
            rig = Rig(postgres, redis, None, None, options, random.Random(options.seed))  # type: ignore[arg-type]
            scenarios = asyncio.run(_run(options, rig, progress))
        finally:
            redis.stop()
            postgres.stop()
    totals = Counter[str]()
    for scenario in scenarios.values():
        totals.update(scenario["violations"])
    return {
        "ok": not any(totals.values()),
        "options": asdict(options),
        "checks": [*CHECKS, "heals"],
        "scenarios": scenarios,
        "violations": {check: totals.get(check, 0) for check in [*CHECKS, "heals"]},
        "actions": sum(s["actions"] for s in scenarios.values()),
        "faults": sum(s["faults"] for s in scenarios.values()),
        "elapsed_seconds": round(time.monotonic() - started, 1),
    }


def scenario_line(name: str, s: dict[str, Any]) -> str:
    """One scenario's report in one line."""
    broken = {k: v for k, v in s["violations"].items() if v}
    return (
        f"{name:20} {s['actions']:4} actions {s['faults']:3} faults "
        f"errors {s['errors'] or '{}'} lost {s['lost_chats']} "
        f"{s['seconds']['total']:5.1f} s  violations {broken or 0}"
    )


def summary(report: dict[str, Any]) -> str:
    """The report in a few lines: one per scenario, then the totals."""
    lines = [scenario_line(name, s) for name, s in report["scenarios"].items()]
    lines.append(
        f"{'total':20} {report['actions']:4} actions {report['faults']:3} faults, "
        f"violations {sum(report['violations'].values())}, {report['elapsed_seconds']} s: "
        + ("ok" if report["ok"] else "FAILED")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m soak.faults``: exit 1 if a check fails, 2 if it cannot run here."""
    defaults = FaultOptions()
    parser = argparse.ArgumentParser(prog="python -m soak.faults", description=__doc__)
    parser.add_argument("--chats", type=int, default=defaults.chats)
    parser.add_argument("--turns", type=int, default=defaults.turns)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--timeout", type=float, default=defaults.timeout)
    parser.add_argument("--blackhole", type=float, default=defaults.blackhole)
    parser.add_argument("--delay", type=float, default=defaults.delay)
    parser.add_argument("--faults", type=int, default=defaults.faults, help="per scenario")
    parser.add_argument("--scenario", action="append", default=[], choices=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report ({RESULTS})")
    args = parser.parse_args(argv)
    options = FaultOptions(
        chats=args.chats,
        turns=args.turns,
        seed=args.seed,
        timeout=args.timeout,
        blackhole=args.blackhole,
        delay=args.delay,
        faults=args.faults,
        scenarios=tuple(args.scenario),
    )
    from .outage import Missing

    try:
        report = run_faults(options, lambda n, s: print(scenario_line(n, s), flush=True))
    except Missing as missing:
        print(f"soak.faults: {missing}", file=sys.stderr)
        return 2
    report["command"] = "python -m soak.faults " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    print(summary(report).splitlines()[-1])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
