"""Failure reports of the interruption matrix: per test, grouped by problem; per session, counts.

Set ``STATE_EXT_INTERRUPTION_REPORT=path.json`` to also write every failing cell to a file.
Under pytest-xdist each worker counts its own tests and hands the counts to the controller
(``integration/conftest.py``), which prints the summary and writes the file, once.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._matrix import Cell, Outcome

__all__ = ["PLUGIN_NAME", "SESSION_SUMMARY", "Tally", "render"]

PLUGIN_NAME = "interruption-matrix-tally"  # the session's Tally, as a pytest plugin
# A test's user property whose text integration/conftest.py prints at the session's end.
SESSION_SUMMARY = "session-summary"

_EXAMPLES = 4


def render(cell: Cell, outcomes: Sequence[Outcome]) -> str:
    """One test's verdict: how many cells failed, then each problem kind with its points."""
    ran = [o for o in outcomes if o.skipped is None]
    failed = [o for o in ran if o.problems]
    lines = [f"{cell.name}: {len(failed)} of {len(ran)} cells failed"]
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in failed:
        for kind in dict.fromkeys(p.kind for p in outcome.problems):
            groups[kind].append(outcome)
    for kind, members in sorted(groups.items(), key=lambda g: -len(g[1])):
        points = "; ".join(o.point.label for o in members[:_EXAMPLES])
        more = f" (+{len(members) - _EXAMPLES} more)" if len(members) > _EXAMPLES else ""
        detail = next(p.detail for p in members[0].problems if p.kind == kind)
        lines.append(f"  {kind} [{len(members)} cells] at {points}{more}; e.g. {detail}")
    return "\n".join(lines)


@dataclass(eq=False)  # hashable: it is registered as a pytest plugin
class Tally:
    """Counts over the whole session: cells run, skipped and failed, failures by kind."""

    ran: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, cell: Cell, outcomes: Sequence[Outcome]) -> None:
        """Count one test's cells."""
        for outcome in outcomes:
            if outcome.skipped is not None:
                self.skipped[outcome.skipped] += 1
                continue
            self.ran += 1
            if not outcome.problems:
                continue
            self.failed += 1
            self.kinds.update({p.kind for p in outcome.problems})
            self.failures.append(
                {
                    "cell": cell.name,
                    "point": outcome.point.label,
                    "problems": [str(p) for p in outcome.problems],
                    "kinds": sorted({p.kind for p in outcome.problems}),
                }
            )

    def to_dict(self) -> dict[str, Any]:
        """The counts as plain data (what a pytest-xdist worker can send to the controller)."""
        return {
            "ran": self.ran,
            "skipped": dict(self.skipped),
            "failed": self.failed,
            "kinds": dict(self.kinds),
            "failures": self.failures,
        }

    def merge(self, counts: dict[str, Any]) -> None:
        """Add the counts of another process (its ``to_dict()``)."""
        self.ran += counts["ran"]
        self.skipped.update(counts["skipped"])
        self.failed += counts["failed"]
        self.kinds.update(counts["kinds"])
        self.failures += counts["failures"]

    def summary(self) -> list[str]:
        """Lines for the end of the session."""
        lines = [
            f"interruption matrix: {self.ran} cells run, {self.failed} failed, "
            f"{sum(self.skipped.values())} skipped point-cells"
        ]
        lines += [f"  {n:5d} failing cells: {kind}" for kind, n in self.kinds.most_common()]
        path = os.environ.get("STATE_EXT_INTERRUPTION_REPORT")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump({"ran": self.ran, "failures": self.failures}, out, indent=1)
            lines.append(f"  failing cells written to {path}")
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """pytest hook: print the summary once the session ends (on the controller, under xdist)."""
        if hasattr(terminalreporter.config, "workerinput"):
            return  # a pytest-xdist worker: its counts go to the controller instead
        if self.ran or self.skipped:
            for line in self.summary():
                terminalreporter.write_line(line)
