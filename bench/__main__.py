"""``python -m bench``: run every benchmark pair, print the tables, write the JSON results.

``--markdown docs/performance.md`` also writes the run's one table of targets (target, ours,
anchor, ratio, met or missed, the command that measures it) and the run's machine and duration
into that page, between its ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from . import bench_context, bench_reasoning, bench_store, bench_tracker, bench_wrapper
from ._common import Section

__all__ = ["BEGIN", "END", "SUITES", "Section", "main", "targets_table", "write_page"]

SUITES: dict[str, Callable[..., Section]] = {
    "context": bench_context.run,
    "reasoning": bench_reasoning.run,
    "tracker": bench_tracker.run,
    "wrapper": bench_wrapper.run,
    "store": bench_store.run,
}
RESULTS = Path(__file__).parent / "results" / "latest.json"
BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"


def machine() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in ("openai-agents", "openai", "tiktoken", "langchain-core", "SQLAlchemy", "psycopg"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "packages": versions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--only", choices=sorted(SUITES), action="append", help="run only these")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON file ({RESULTS})")
    parser.add_argument(
        "--markdown", type=Path, help="write the targets table into this page (between markers)"
    )
    args = parser.parse_args(argv)
    # The SDK would try to export traces of every benchmark run.
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    names = args.only or list(SUITES)
    info = machine()
    command = "python -m bench" + (" --quick" if args.quick else "")
    command += "".join(f" --only {n}" for n in args.only or ())
    print(f"# {command}")
    print(f"Python {info['python']} on {info['platform']}, {info['cores']} cores")
    print(f"packages: {', '.join(f'{k} {v}' for k, v in info['packages'].items())}\n")
    started = time.perf_counter()
    sections: dict[str, Any] = {}
    for name in names:
        t0 = time.perf_counter()
        section = SUITES[name](quick=args.quick)
        sections[name] = {**section.to_json(), "seconds": time.perf_counter() - t0}
        print(section.render())
        print(f"({name}: {time.perf_counter() - t0:.0f} s)\n", flush=True)
    total = time.perf_counter() - started
    missed = [t for s in sections.values() for t in s["targets"] if t["met"] is False]
    report = {
        "command": command,
        "quick": args.quick,
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {**info, "load_average_end": list(os.getloadavg())},
        "seconds": total,
        "sections": sections,
    }
    print(targets_table(report))
    print(f"\ntotal {total:.0f} s; targets missed: {len(missed)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")
    if args.markdown is not None:
        write_page(args.markdown, report)
        print(f"wrote {args.markdown}")
    return 0


def targets_table(report: dict[str, Any]) -> str:
    """The run's one table: every target of every section, met, missed or not measured."""
    head = ("target", "ours", "anchor", "ratio", "met", "command")
    quick = " --quick" if report["quick"] else ""
    body = []
    for name, section in report["sections"].items():
        for t in section["targets"]:
            verdict = {True: "met", False: "**MISSED**", None: "not measured"}[t["met"]]
            body.append(
                (
                    t["target"],
                    t.get("ours", "—"),
                    t.get("anchor", "—"),
                    t.get("ratio", t["measured"]),
                    verdict,
                    f"`python -m bench{quick} --only {name}`",
                )
            )
    widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    lines = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(lines + [line(row) for row in body])


def _run_facts(report: dict[str, Any]) -> str:
    info = report["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
    verdicts = [t["met"] for s in report["sections"].values() for t in s["targets"]]
    start, end = info["load_average"][0], info["load_average_end"][0]
    lines = [
        f"- Command: `{report['command']}`, finished {report['finished']}, "
        f"{report['seconds']:.0f} s wall time.",
        f"- Machine: {info['cores']} cores ({info['processor']}, {info['platform']}), "
        f"Python {info['python']}; {packages}.",
        f"- Load average (1 min) at the start {start:.2f}, at the end {end:.2f}: above 0 means "
        "other work shared the machine; the pairs are interleaved so both sides share it.",
        f"- Targets: {verdicts.count(True)} met, {verdicts.count(False)} missed, "
        f"{verdicts.count(None)} not measured.",
    ]
    if report["quick"]:
        lines.append(
            "- **A `--quick` run**: tiny sizes and few pairs, to show the format only; its "
            "numbers are not results."
        )
    return "\n".join(lines)


def write_page(page: Path, report: dict[str, Any]) -> None:
    """Replace what lies between the page's markers with this run's facts and table."""
    text = page.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{page} has no {BEGIN} ... {END} markers")
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    notes = [n for section in report["sections"].values() for n in section.get("page_notes", [])]
    parts = [BEGIN, _run_facts(report), "", targets_table(report)]
    if notes:
        parts += ["", *(f"- {note}" for note in notes)]
    block = "\n".join([*parts, END])
    page.write_text(before + block + after)


if __name__ == "__main__":
    sys.exit(main())
