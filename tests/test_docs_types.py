"""Every Python example in README.md and docs/ passes ``mypy --strict``.

A user who copies an example into a strictly typed code base gets no error: the library's types
help instead of fighting them (no Optional ledger after ``previous_response()``, the shared
Literal types accepted where a caller names a strategy). The examples are checked together, in
one mypy run, against the library's sources, the way a user's project would see them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_docs_examples import examples

ROOT = Path(__file__).resolve().parent.parent


def test_every_example_passes_mypy_strict(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra (.ci/run installs it)")
    files = []
    for number, (where, code) in enumerate(examples(), 1):
        name = where.replace("/", "_").replace(".md#", "_").replace(".", "_").replace("-", "_")
        script = tmp_path / f"ex{number:02d}_{name}.py"
        script.write_text(code)
        files.append(str(script))
    assert files, "no examples found"
    # Each example is its own script: check them one module at a time (they share no names),
    # against the library's own sources rather than its installed copy.
    env_path = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(ROOT)
    try:
        out, err, status = api.run(
            [
                "--strict",
                "--no-incremental",
                "--follow-imports=silent",
                "--cache-dir",
                os.devnull,
                *files,
            ]
        )
    finally:
        if env_path is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = env_path
    assert status == 0, f"mypy --strict on the docs' examples:\n{out}{err}"
