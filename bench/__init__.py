"""Benchmarks, side by side with what users would otherwise use; not part of the test suite.

Run them all with ``python -m bench`` (``--quick`` for a smoke run); one suite with
``python -m bench --only context`` (or ``tracker``, ``wrapper``, ``store``). Every comparison
is a run of interleaved pairs. Results are printed as tables, written to
``bench/results/latest.json``, and with ``--markdown docs/performance.md`` the run's one table
of targets is written into that page.
"""
