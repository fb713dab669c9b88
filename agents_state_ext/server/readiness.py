"""How ``serve`` learns that every worker serves: each worker leaves a mark, the parent counts.

uvicorn's supervisor says nothing when its workers are up, and a probe of the shared port
reaches whichever worker accepts first. So ``serve`` names a folder in
``AGENTS_STATE_EXT_READY_DIR``; a worker whose lifespan has opened its store writes a file there
named by its process id (holding its worker id) and removes it at shutdown, and the parent
announces once as many live workers have written theirs as it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["READY_DIR_ENV", "announce", "watch", "withdraw"]

READY_DIR_ENV = "AGENTS_STATE_EXT_READY_DIR"
"""The folder where workers mark themselves ready (set by ``serve``; unset: no marks)."""

POLL_SECONDS = 0.2


def _mark() -> Path | None:
    folder = os.environ.get(READY_DIR_ENV)
    return Path(folder) / str(os.getpid()) if folder else None


def announce(worker_id: str) -> None:
    """This worker serves: leave its mark (when ``serve`` asked for marks)."""
    mark = _mark()
    if mark is not None:
        # Written beside it, then renamed: the parent never reads a mark half written (an
        # empty id in the line). The ``.tmp`` name is not all digits, so it is never counted.
        draft = mark.with_name(f"{mark.name}.tmp")
        with contextlib.suppress(OSError):  # a lost mark costs the line, never the worker
            draft.write_text(worker_id, encoding="utf-8")
            draft.replace(mark)


def withdraw() -> None:
    """This worker stops serving: remove its mark."""
    mark = _mark()
    if mark is not None:
        with contextlib.suppress(OSError):
            mark.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the pid: not our worker
        return False
    return True


def _serving(folder: Path) -> list[str]:
    ids = []
    for mark in folder.iterdir():
        if mark.name.isdigit() and _alive(int(mark.name)):
            with contextlib.suppress(OSError):
                ids.append(mark.read_text(encoding="utf-8"))
    return sorted(ids)


@contextlib.contextmanager
def watch(workers: int, on_ready: Callable[[list[str]], None]) -> Iterator[dict[str, str]]:
    """Watch a fresh marks folder; call ``on_ready(worker_ids)`` once ``workers`` serve.

    Yields the environment the workers need. The folder goes away on exit.
    """
    folder = Path(tempfile.mkdtemp(prefix="agents-state-ext-ready-"))
    done = threading.Event()

    def poll() -> None:
        while not done.wait(POLL_SECONDS):
            ids = _serving(folder)
            if len(ids) >= workers:
                on_ready(ids)
                return

    thread = threading.Thread(target=poll, name="serve-readiness", daemon=True)
    thread.start()
    try:
        yield {READY_DIR_ENV: str(folder)}
    finally:
        done.set()
        thread.join(timeout=5)
        shutil.rmtree(folder, ignore_errors=True)
