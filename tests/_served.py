"""The app as its own process: ``agents-state-ext serve`` or ``uvicorn --factory``, as run.

``ServedProcess(["serve", ...], folder)`` starts ``python -m agents_state_ext serve --port N
...`` (``["uvicorn", ...]``: ``python -m uvicorn ... --port N``) on a free port with this
checkout first on ``PYTHONPATH``, the offline mock model and its output in ``folder/serve.log``;
entering waits until ``/api/health`` answers, leaving stops it with SIGINT.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
from _outage import free_port

ROOT = Path(__file__).resolve().parents[1]
APP_FACTORY = "agents_state_ext.server.app:app_from_env"


def interrupt(process: subprocess.Popen[bytes]) -> None:
    """Stop a served app as Ctrl-C does (SIGINT), killing it if it has not ended in 60 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a served app: the checkout importable, no OpenAI key."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "OPENAI_API_KEY": "", "PYTHONPATH": path, **(extra or {})}


def command(args: Sequence[str], port: int) -> list[str]:
    """``serve ...`` or ``uvicorn ...`` as the command line of a Python module, on ``port``."""
    program, *rest = args
    module = "uvicorn" if program == "uvicorn" else "agents_state_ext"
    head = [sys.executable, "-m", module] + ([] if program == "uvicorn" else [program])
    return [*head, *rest, "--port", str(port)]


class ServedProcess:
    """``serve`` or ``uvicorn`` serving the app on a free port, until the block ends."""

    def __init__(
        self, args: Sequence[str], folder: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args, self.folder, self.env = list(args), folder, environment(env)
        self.log = folder / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServedProcess:
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                command(self.args, self.port),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.folder,
            )
        deadline = time.monotonic() + 90
        with httpx.Client(base_url=self.url, timeout=5) as probe:
            while True:  # waiting for startup, not asserting on time
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"it did not start:\n{self.log.read_text()[-3000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if probe.get("/api/health").status_code == 200:
                        return self
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            interrupt(self.process)
