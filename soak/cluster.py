"""The system under soak: a fresh PostgreSQL schema, one mock server, N uvicorn workers.

Each worker is its own ``uvicorn --factory agents_state_ext.server.app:app_from_env`` process
on a port of its own, so the load driver knows which worker streams an answer, can aim a stop
at another one, and can SIGKILL one worker and start it again on the same port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2

from agents_state_ext.testing import MockServer

__all__ = ["Cluster", "Worker", "schema_url"]

_REPO = Path(__file__).resolve().parents[1]


def schema_url(url: str, schema: str) -> str:
    """``url`` with its connections' ``search_path`` set to ``schema`` (libpq ``options``)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Worker:
    """One worker process slot: its port, its current process, how often it was started."""

    index: int
    port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log: Path | None = None
    pids: list[int] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        """Where the worker answers."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """Whether the worker's process runs."""
        return self.process is not None and self.process.poll() is None


class Cluster:
    """Start and stop everything the soak runs against; ``with Cluster(...) as cluster:``.

    ``postgres_url`` / ``redis_url``: the services; a fresh schema and stop-bus namespace are
    made for this run (the schema is dropped at the end unless ``keep_schema``). ``echo_delay``
    is the mock's seconds between streamed words; ``lease_ttl`` the workers' lease TTL.
    """

    def __init__(
        self,
        *,
        postgres_url: str,
        redis_url: str,
        workers: int,
        echo_delay: float,
        lease_ttl: float,
        keep_schema: bool = False,
    ) -> None:
        self.postgres_url = postgres_url
        self.redis_url = redis_url
        self.schema = f"soak_{uuid.uuid4().hex[:12]}"
        self.namespace = f"soak-{uuid.uuid4().hex[:12]}"
        self.store_url = schema_url(postgres_url, self.schema)
        self.lease_ttl = lease_ttl
        self.keep_schema = keep_schema
        self.mock = MockServer(echo_delay=echo_delay)
        self.workers = [Worker(i, _free_port()) for i in range(workers)]
        self._logs = tempfile.TemporaryDirectory(prefix="soak-")

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        try:
            self._create_schema()
            self.mock.start()
            for worker in self.workers:
                self._spawn(worker)
            for worker in self.workers:
                self.wait_ready(worker)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker and the mock, drop the schema (unless kept)."""
        for worker in self.workers:
            self._end(worker, signal.SIGTERM)
        with contextlib.suppress(Exception):
            self.mock.stop()
        if self.keep_schema:
            print(f"soak: kept schema {self.schema}")
        else:
            with contextlib.suppress(Exception):
                self._sql(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        self._logs.cleanup()

    def _sql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.postgres_url, autocommit=True) as conn:
            conn.execute(statement.encode())

    def _create_schema(self) -> None:
        self._sql(f'CREATE SCHEMA "{self.schema}"')

    # -- workers ------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        path = os.pathsep.join([str(_REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return {
            **os.environ,
            "PYTHONPATH": path,
            "OPENAI_API_KEY": "",
            "AGENTS_STATE_EXT_STORE": self.store_url,
            "AGENTS_STATE_EXT_REDIS": self.redis_url,
            "AGENTS_STATE_EXT_MOCK_URL": self.mock.base_url,
            "AGENTS_STATE_EXT_LEASE_TTL": repr(self.lease_ttl),
            "AGENTS_STATE_EXT_NAMESPACE": self.namespace,
            "AGENTS_STATE_EXT_STRATEGY": "previous_response",
        }

    def _spawn(self, worker: Worker) -> None:
        command = [sys.executable, "-m", "uvicorn", "--factory"]
        command += ["agents_state_ext.server.app:app_from_env", "--host", "127.0.0.1"]
        command += ["--port", str(worker.port), "--log-level", "warning", "--no-access-log"]
        worker.starts += 1
        worker.log = Path(self._logs.name) / f"worker-{worker.index}-{worker.starts}.log"
        with open(worker.log, "wb") as log:
            worker.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self._logs.name,
            )
        worker.pids.append(worker.process.pid)

    def wait_ready(self, worker: Worker, timeout: float = 60.0) -> None:
        """Wait until ``worker`` answers ``/api/health``; ``RuntimeError`` with its log if not."""
        deadline = time.monotonic() + timeout
        with httpx2.Client(base_url=worker.base_url, trust_env=False, timeout=2) as probe:
            while True:
                if not worker.alive:
                    raise RuntimeError(f"worker {worker.index} exited:\n{self.log_tail(worker)}")
                with contextlib.suppress(httpx2.TransportError):
                    if probe.get("/api/health").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {worker.index} never answered")
                time.sleep(0.05)

    def kill(self, worker: Worker) -> None:
        """SIGKILL the worker (what it streams is cut off mid-answer)."""
        self._end(worker, signal.SIGKILL)

    def restart(self, worker: Worker) -> None:
        """Start the worker again on its port (a new process, a new worker id)."""
        self._spawn(worker)

    def _end(self, worker: Worker, how: signal.Signals) -> None:
        process = worker.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(how)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        worker.process = None

    def log_tail(self, worker: Worker, size: int = 3000) -> str:
        """The end of the worker's current log."""
        if worker.log is None or not worker.log.exists():
            return ""
        return worker.log.read_bytes()[-size:].decode(errors="replace")

    def logs(self) -> str:
        """Every worker log's lines that report an error (for the report when a check fails)."""
        lines: list[str] = []
        for log in sorted(Path(self._logs.name).glob("worker-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if "Error" in line or "Traceback" in line or "WARNING" in line:
                    lines.append(f"{log.stem}: {line}")
        return "\n".join(lines)
