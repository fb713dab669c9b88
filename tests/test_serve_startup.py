"""``serve --workers 2`` starts on a loaded machine: no worker killed, one readiness line.

Each spawned worker imports the SDK before it can answer uvicorn's health check, which on a
busy machine takes longer than uvicorn's 5 s default; the supervisor then killed and respawned
its own workers. Here busy-loop processes load the machine while ``serve`` starts:
``STATE_EXT_STARTUP_LOAD`` of them (default 1, the CI size; the issue's loaded machine is
about 8 on 2 cores: ``STATE_EXT_STARTUP_LOAD=8 python -m pytest -n 0 -m slow``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _backends import redis_url, unique_name
from _outage import free_port

READY = "agents-state-ext serve: ready, 2 worker(s) serving"
STARTUP_LIMIT = 300.0
"""Seconds to wait for the readiness line before giving up (a hang guard, not a measurement)."""
KILLED = ("died", "Terminated child", "not ready in time", "failed to start")


@contextlib.contextmanager
def cpu_load() -> Iterator[None]:
    """``STATE_EXT_STARTUP_LOAD`` busy loops for the duration."""
    count = int(os.environ.get("STATE_EXT_STARTUP_LOAD", "1"))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def lines_of(stream: object) -> queue.Queue[str | None]:
    """The lines of ``stream`` as they come (None at its end), read on a thread."""
    found: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            found.put(line)
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    return found


def worker_ids(base: str) -> set[str]:
    """The worker ids /api/health names over fresh connections, until two answered."""
    seen: set[str] = set()
    for _ in range(200):
        with httpx.Client(base_url=base, timeout=30) as client:  # a new connection each time
            answer = client.get("/api/health")
        assert answer.status_code == 200, answer.text
        seen.add(answer.json()["worker_id"])
        if len(seen) == 2:
            break
    return seen


@pytest.mark.slow
def test_two_workers_start_under_cpu_load_and_serve_announces_them(tmp_path: Path) -> None:
    redis = redis_url()
    port = free_port()
    env = {
        **os.environ,
        "OPENAI_API_KEY": "",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")])
        ),
        "AGENTS_STATE_EXT_NAMESPACE": unique_name("startup"),
    }
    command = [sys.executable, "-m", "agents_state_ext", "serve", "--port", str(port)]
    command += ["--workers", "2", "--redis", redis, "--store", str(tmp_path / "served.db")]
    command += ["--log-level", "info"]  # uvicorn says "Child process [...] died" at info
    log: list[str] = []
    with cpu_load():
        server = subprocess.Popen(
            command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
        )
        try:
            lines = lines_of(server.stderr)
            while not any(READY in line for line in log):
                line = lines.get(timeout=STARTUP_LIMIT)
                assert line is not None, "serve exited:\n" + "".join(log)
                log.append(line)
            ready = [line for line in log if READY in line]
            ids = worker_ids(f"http://127.0.0.1:{port}")
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
            assert server.stderr is not None
            server.stderr.close()
    started = "".join(log)
    assert len(ids) == 2, started
    assert len(ready) == 1 and all(i in ready[0] for i in ids), started
    assert not [line for line in log if any(word in line for word in KILLED)], started
