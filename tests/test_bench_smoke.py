"""Smoke test of the benchmarks: every suite runs on tiny sizes and produces each of its rows.

No timing is asserted: only that each side produced a result, that the checks the benchmarks
make (same items, same driving sequence as a real run, within budget) hold, and that every
target reaches the one table of ``docs/performance.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import (
    _callgrind,
    _callgrind_run,
    _callgrind_tracker,
    bench_context,
    bench_reasoning,
    bench_store,
    bench_tracker,
    bench_wrapper,
)


def _measured(section: bench_main.Section, *, skip: str = "\0") -> None:
    assert section.rows
    for row in section.rows:
        if skip in row.case:
            continue
        assert row.ours is not None and row.ours > 0, row
        assert row.theirs is not None and row.theirs > 0, row


def test_context_suite_produces_every_row_within_budget() -> None:
    # The rival implementation is a bench-only dependency (the "bench" extra).
    pytest.importorskip("langchain_core", reason="bench extra not installed")
    section = bench_context.run(quick=True, sizes=(120,), memory_size=120)
    _measured(section, skip="floor of one new turn")
    (floor,) = [row for row in section.rows if "floor of one new turn" in row.case]
    assert floor.ours is not None and floor.ours > 0 and floor.theirs is None
    cases = [row.case for row in section.rows]
    for case in (
        "120 msgs: warm select vs trim exact",
        "120 msgs: warm select vs trim warm cache",
        "120 msgs: one new turn, then select vs trim warm cache",
        "120 msgs: floor of one new turn: its two exact encodes alone",
        "120 msgs: cold counting vs raw tiktoken pass",
        "120 msgs: memory, graph vs the SDK's item list",
    ):
        assert case in cases
    check = section.details["120"]["check"]
    assert check["ours_within_budget"] and check["theirs_within_budget"]
    assert check["after_new_turns_within_budget"]
    assert check["ours_turns"] > 0 and check["theirs_turns"] > 0
    assert check["trim_split_tool_pairs"] == 0
    assert section.details["memory"]["same_items"]
    names = [t["target"] for t in section.targets]
    assert any("warm select ≤ 50 µs" in n for n in names)
    assert any("4,000x" in n for n in names)
    assert any("one new turn" in n for n in names)
    assert any("cold counting" in n for n in names)
    assert any("memory" in n for n in names)
    # The one-new-turn row's floor goes to the page, under the table.
    assert [n for n in section.page_notes if "floor at 120 messages" in n]
    assert section.to_json()["page_notes"] == section.page_notes


def test_tracker_suite_drives_the_sdk_as_its_run_loop_does() -> None:
    section = bench_tracker.run(quick=True, checkpoints=(10, 20))
    _measured(section)
    check = section.details["driving_check"]
    assert set(check["cases"]) == {
        "SDK, Runner.run",
        "SDK, Runner.run_streamed",
        "ours, ConversationState.run",
    }
    assert check["same"], check
    assert section.details["same_sent_lists"]
    assert [r.case for r in section.rows][:2] == ["turn 10 (10 turns)", "turn 20 (20 turns)"]


def test_tracker_driving_check_fails_on_a_wrong_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    # The old way (the whole generated_items on every turn) must not pass the check.
    def whole_list(self: bench_tracker.SdkDriver, turn: bench_tracker.Turn) -> None:
        self.generated = self.generated + turn.new_items
        self.pending = []

    monkeypatch.setattr(bench_tracker.SdkDriver, "after", whole_list)
    check = bench_tracker.driving_check(6)
    assert not check["cases"]["SDK, Runner.run"]["same"]
    assert check["cases"]["ours, ConversationState.run"]["same"]


def test_wrapper_suite_runs_both_sides_and_names_the_instruction_rows() -> None:
    section = bench_wrapper.run(quick=True, lengths=(2,), pairs=2)
    _measured(section, skip="callgrind")
    assert not [c for c in section.checks if "expected" in c or "re-sent" in c]
    cells = [r.case for r in section.rows if "callgrind" not in r.case]
    assert len(cells) == 4  # canned and mock, streamed and not
    counted = [r for r in section.rows if "callgrind" in r.case]
    assert len(counted) == 2 and all(r.note == "not measured: --quick" for r in counted)
    assert [t["met"] for t in section.targets][-1] is None


def test_callgrind_script_runs_and_its_output_parses(capsys: pytest.CaptureFixture[str]) -> None:
    # Without valgrind the script makes the same runs, just not counted.
    assert _callgrind_run.main(["--side", "ours", "--turns", "2", "--runs", "1"]) == 0
    assert _callgrind_run.main(["--side", "sdk", "--turns", "2", "--runs", "1", "--streamed"]) == 0
    assert capsys.readouterr().out.count("responses per run: [3]") == 2
    text = "events: Ir\nfl=x\nfn=y\n16 2\nsummary: 123456\ntotals: 123456\n"
    assert _callgrind.parse_callgrind_total(text) == 123456
    with pytest.raises(ValueError):
        _callgrind.parse_callgrind_total("events: Ir\n")


def test_reasoning_suite_builds_the_same_history_with_and_without_reasoning() -> None:
    section = bench_reasoning.run(quick=True, sizes=(120,))
    _measured(section)
    assert len(section.rows) == 3 and len(section.targets) == 1
    check = section.details["120"]["check"]
    without, inline, by_id = check["without"], check["inline"], check["by_id"]
    # Only the reasoning side holds reasoning; inline keeps every selected one, by id none.
    assert without["reasoning_selected"] == 0
    assert inline["reasoning_selected"] > 0
    assert inline["reasoning_carried"] == inline["reasoning_selected"]
    assert inline["reasoning_dropped"] == 0
    assert by_id["reasoning_dropped"] == by_id["reasoning_selected"] > 0
    assert by_id["reasoning_carried"] == by_id["reasoning_ids_sent"] == 0
    assert all(c["within_budget"] for c in check.values())
    assert inline["sent_tokens"] == inline["used"]
    assert by_id["sent_tokens"] < by_id["used"]
    assert "both sides end on the same prompt: True" in "\n".join(section.checks)
    json.dumps(section.to_json())


def test_reasoning_graph_keeps_the_texts_of_the_graph_without() -> None:
    from bench._common import Reasoning, make_graph

    plain = make_graph(200).path
    thinking = make_graph(200, reasoning=Reasoning()).path
    assert [n.role for n in plain] == [n.role for n in thinking]

    def texts(path: list[Any]) -> list[Any]:
        return [
            (i.get("content"), i.get("arguments"), i.get("output"))
            for n in path
            for i in n.items
            if i.get("type") != "reasoning"
        ]

    assert texts(plain) == texts(thinking)
    reasoning = [i for n in thinking for i in n.items if i.get("type") == "reasoning"]
    assert reasoning
    assert all(i["encrypted_content"] and i["id"].startswith("rs_") for i in reasoning)


def test_store_pairs_hold_the_same_history_on_both_sides() -> None:
    # PostgreSQL runs too when STATE_EXT_POSTGRES_URL is set (and SQLAlchemy is installed).
    section = bench_store.run(quick=True, size=60, big=200, pairs=3)
    _measured(section)
    details = section.details
    assert details["same_history"] and all(details["same_history"].values())
    assert details["reopen_same_selection"] and details["reopen_missing_counts"] == 0
    parts = {row.extra["part"] for row in section.rows}
    assert {"SQLite", "thread hop", "reopen + select"} <= parts
    assert any(r.case.startswith("last 50: active_path(limit=50)") for r in section.rows)
    if "PostgreSQL" not in parts:
        assert [n for n in section.notes if "PostgreSQL part skipped" in n]
    for row in section.rows:
        assert row.extra["pairs"] == (3 if row.extra["part"] != "thread hop" else 30)
    # Every target row has its verdict, and the section is JSON for bench/results.
    assert len(section.targets) == sum(r.extra["met"] is not None for r in section.rows) + 1
    json.dumps(section.to_json())
    assert "| part" in section.render()


def test_entry_point_writes_json_and_the_page_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # main() turns tracing off through the environment (for the processes it starts): undone
    # after the test, so later tests of this worker, and their child processes, trace again.
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    out = tmp_path / "latest.json"
    page = tmp_path / "performance.md"
    page.write_text(f"# Page\n\nkept\n\n{bench_main.BEGIN}\nold\n{bench_main.END}\n\nafter\n")
    argv = ["--quick", "--only", "tracker", "--out", str(out), "--markdown", str(page)]
    assert bench_main.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["quick"] and "tracker" in report["sections"]
    assert report["machine"]["cores"]
    text = page.read_text()
    assert text.startswith("# Page\n\nkept\n") and text.endswith("\n\nafter\n")
    assert "old" not in text and "| target" in text and "A `--quick` run" in text
    for target in report["sections"]["tracker"]["targets"]:
        assert target["target"] in text
    assert "`python -m bench --quick --only tracker`" in text


def test_tracker_window_script_runs_and_refuses_a_window_outside_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Without callgrind the script only drives the tracker; the full bench counts its window.
    assert _callgrind_tracker.main(["--turns", "12", "--first", "3", "--count", "4"]) == 0
    sent = int(capsys.readouterr().out.rsplit(":", 1)[1])
    assert sent > 0
    with pytest.raises(SystemExit):
        _callgrind_tracker.main(["--turns", "12", "--first", "10", "--count", "4"])


def test_tracker_instruction_target_is_not_measured_in_a_quick_run() -> None:
    section = bench_main.Section("t", "ours", "anchor")
    bench_tracker._instruction_flatness(section, (10, 40), quick=True)
    (target,) = section.targets
    assert target["met"] is None and "callgrind instructions" in target["target"]


def test_page_notes_are_written_under_the_table(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(f"{bench_main.BEGIN}\n{bench_main.END}\n")
    section = bench_main.Section("t", "ours", "anchor")
    section.target("a target", True, "1x")
    section.page_notes.append("the floor of a row")
    report = json.loads(_report(section))
    bench_main.write_page(page, report)
    text = page.read_text()
    table_end = text.index("| a target")
    assert text.index("- the floor of a row") > table_end
    assert text.endswith(f"- the floor of a row\n{bench_main.END}\n")


def _report(section: bench_main.Section) -> str:
    """A report of one section, as ``main`` writes it to JSON."""
    machine = {
        "cores": 2,
        "processor": "x",
        "platform": "p",
        "python": "3",
        "packages": {},
        "load_average": [0.0],
        "load_average_end": [0.0],
    }
    return json.dumps(
        {
            "quick": False,
            "command": "python -m bench",
            "finished": "now",
            "seconds": 1.0,
            "machine": machine,
            "sections": {"t": section.to_json()},
        }
    )


def test_entry_point_refuses_a_page_without_markers(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# Page\n")
    report = {"quick": True, "sections": {}}
    with pytest.raises(SystemExit):
        bench_main.write_page(page, report)
