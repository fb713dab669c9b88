"""Smoke test of the benchmarks: every pair runs on tiny sizes and both sides give results.

No timing is asserted: only that each side produced a result, within budget where there is one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import bench_context, bench_store, bench_tracker, bench_wrapper


def _measured(section: bench_main.Section) -> None:
    assert section.rows
    for row in section.rows:
        assert row.ours is not None and row.ours > 0, row
        assert row.theirs is not None and row.theirs > 0, row


def test_context_pair_selects_within_budget() -> None:
    # The rival implementation is a bench-only dependency (the "bench" extra).
    pytest.importorskip("langchain_core", reason="bench extra not installed")
    section = bench_context.run(quick=True, sizes=(120,))
    _measured(section)
    details = section.details["120"]
    assert details["ours_within_budget"] and details["theirs_within_budget"]
    assert details["ours_turns"] > 0 and details["theirs_turns"] > 0
    assert details["trim_split_tool_pairs"] == 0


def test_tracker_pair_sends_the_same_items() -> None:
    section = bench_tracker.run(quick=True, checkpoints=(10, 20))
    _measured(section)
    assert section.details["same_sent_lists"]


def test_wrapper_pair_runs_both_sides() -> None:
    section = bench_wrapper.run(quick=True, lengths=(2,))
    _measured(section)
    assert not [c for c in section.checks if "expected" in c or "re-sent" in c]


def test_store_pairs_hold_the_same_history_on_both_sides() -> None:
    # PostgreSQL runs too when STATE_EXT_POSTGRES_URL is set (and SQLAlchemy is installed).
    section = bench_store.run(quick=True, size=60, big=200, pairs=3)
    _measured(section)
    details = section.details
    assert details["same_history"] and all(details["same_history"].values())
    assert details["reopen_same_selection"] and details["reopen_missing_counts"] == 0
    parts = {row.extra["part"] for row in section.rows}
    assert {"SQLite", "thread hop", "reopen + select"} <= parts
    if "PostgreSQL" not in parts:
        assert [n for n in section.notes if "PostgreSQL part skipped" in n]
    for row in section.rows:
        assert row.extra["pairs"] == (3 if row.extra["part"] != "thread hop" else 30)
    # Every target row has its verdict, and the section is JSON for bench/results.
    assert len(section.targets) == sum(r.extra["met"] is not None for r in section.rows) + 1
    json.dumps(section.to_json())
    assert "| part" in section.render()


def test_entry_point_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "latest.json"
    assert bench_main.main(["--quick", "--only", "tracker", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["quick"] and "tracker" in report["sections"]
    assert report["machine"]["cores"]
