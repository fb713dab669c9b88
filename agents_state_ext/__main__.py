"""``python -m agents_state_ext``: the command line (``demo`` runs the offline demo)."""

from __future__ import annotations

import argparse
import sys

from .demo import run_demo


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the exit code."""
    parser = argparse.ArgumentParser(prog="agents-state-ext")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="run the offline demo against the built-in mock server")
    parser.parse_args(argv)
    run_demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
