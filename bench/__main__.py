"""``python -m bench``: run every benchmark pair, print the tables, write the JSON results."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from . import bench_context, bench_store, bench_tracker, bench_wrapper
from ._common import Section

__all__ = ["SUITES", "Section", "main"]

SUITES: dict[str, Callable[..., Section]] = {
    "context": bench_context.run,
    "tracker": bench_tracker.run,
    "wrapper": bench_wrapper.run,
    "store": bench_store.run,
}
RESULTS = Path(__file__).parent / "results" / "latest.json"


def machine() -> dict[str, Any]:
    versions = {}
    for name in ("openai-agents", "openai", "tiktoken", "langchain-core"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
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
    missed = [t for s in sections.values() for t in s["targets"] if not t["met"]]
    print(f"total {total:.0f} s; targets missed: {len(missed)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "command": command,
        "quick": args.quick,
        "machine": info,
        "seconds": total,
        "sections": sections,
    }
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
