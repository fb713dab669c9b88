"""Counting instructions with ``valgrind --tool=callgrind``: noise on the machine cannot move them.

A script run by :func:`instructions` does its setup uncounted and makes the calls to count
inside ``sys.call_tracing``, the one function whose instructions callgrind collects
(``--toggle-collect=sys_call_tracing``). The interpreter runs with ``PYTHONHASHSEED=0``, so the
same script and inputs give the same count.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "UNDER_CALLGRIND",
    "available",
    "instructions",
    "instrumentation_on",
    "parse_callgrind_total",
]

UNDER_CALLGRIND = "BENCH_UNDER_CALLGRIND"
"""Set for a script that runs under callgrind (with instrumentation off when it starts)."""


def available() -> bool:
    """Whether valgrind and callgrind_control are on this machine."""
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def instructions(module: str, args: Sequence[str], *, instrument_at_start: bool) -> int:
    """Instructions collected while ``python -m module *args`` ran under callgrind.

    With ``instrument_at_start=False`` the script switches instrumentation on itself (cheaper
    for a long setup: :mod:`bench._callgrind_run` does so).
    """
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--instr-atstart={'yes' if instrument_at_start else 'no'}",
            "--collect-atstart=no",
            "--toggle-collect=sys_call_tracing",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            module,
            *args,
        ]
        env = {**os.environ, UNDER_CALLGRIND: "1", "PYTHONHASHSEED": "0"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"callgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
        return parse_callgrind_total(Path(out).read_text())


def instrumentation_on() -> None:
    """Ask callgrind to instrument from here on, and spin until it has answered."""
    control = subprocess.Popen(
        ["callgrind_control", "--instr=on", str(os.getpid())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # callgrind reads its commands while this process runs code, not while it sleeps.
    while control.poll() is None:
        sum(range(100))
    if control.returncode != 0:
        raise SystemExit(f"callgrind_control failed: {control.returncode}")


def parse_callgrind_total(text: str) -> int:
    """The total instruction count (``Ir``) of a callgrind output file."""
    for key in ("totals", "summary"):
        found = re.search(rf"^{key}:\s*(\d+)", text, re.MULTILINE)
        if found:
            return int(found.group(1))
    raise ValueError("no totals or summary line in the callgrind output")
