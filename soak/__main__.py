"""``python -m soak``: the multi-worker soak of ``agents-state-ext serve``; exit 1 if a check fails.

Needs ``STATE_EXT_POSTGRES_URL`` and ``STATE_EXT_REDIS_URL``. Prints a summary and writes the
JSON report (default ``soak/results/latest.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .run import SoakOptions, run_soak, summary

RESULTS = Path(__file__).parent / "results" / "latest.json"


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    defaults = SoakOptions()
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--conversations", type=int, default=defaults.conversations)
    parser.add_argument("--seconds", type=float, default=defaults.seconds)
    parser.add_argument("--kills", type=int, default=defaults.kills, help="SIGKILLs in the run")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--echo-delay", type=float, default=defaults.echo_delay)
    parser.add_argument("--lease-ttl", type=float, default=defaults.lease_ttl)
    parser.add_argument("--stop-share", type=float, default=defaults.stop_share)
    parser.add_argument("--clash-share", type=float, default=defaults.clash_share)
    parser.add_argument("--keep-schema", action="store_true", help="keep the PostgreSQL schema")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report ({RESULTS})")
    args = parser.parse_args(argv)
    options = SoakOptions(
        workers=args.workers,
        conversations=args.conversations,
        seconds=args.seconds,
        kills=args.kills,
        seed=args.seed,
        echo_delay=args.echo_delay,
        lease_ttl=args.lease_ttl,
        stop_share=args.stop_share,
        clash_share=args.clash_share,
        keep_schema=args.keep_schema,
    )
    try:
        report = run_soak(options)
    except (RuntimeError, ValueError) as error:
        print(f"soak: {error}", file=sys.stderr)
        return 2
    report["command"] = "python -m soak " + " ".join(argv if argv is not None else sys.argv[1:])
    print(summary(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
