"""One tracker run in which callgrind counts only a window of turns of our tracker.

``python -m bench._callgrind_tracker --turns N --first A --count K``: drives our tracker
through the bench's ``N``-turn run exactly as :mod:`bench.bench_tracker` does, and makes turns
``A`` to ``A + K - 1`` (1-based) inside ``sys.call_tracing``, the one function whose
instructions :func:`bench._callgrind.instructions` collects. Two such runs, an early and a
late window, tell whether a turn's work grows with the run's length, whatever the machine's
caches and load do to its time.
"""

from __future__ import annotations

import argparse
import os
import sys

from ._callgrind import UNDER_CALLGRIND, instrumentation_on
from .bench_tracker import OursDriver, make_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._callgrind_tracker")
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args(argv)
    window = range(args.first, args.first + args.count)
    if window.stop - 1 > args.turns or args.first < 1:
        raise SystemExit("the window must lie within the run")
    driver = OursDriver()
    sent = 0
    under_callgrind = os.environ.get(UNDER_CALLGRIND) == "1"
    for t, turn in enumerate(make_run(args.turns), start=1):
        if t == window.start and under_callgrind:
            instrumentation_on()  # the turns before ran uninstrumented, which is faster
        if t in window:
            sent += len(sys.call_tracing(driver.turn, (turn,)))
        else:
            driver.turn(turn)
        driver.after(turn)
    print(f"items sent in the window: {sent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
