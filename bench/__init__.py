"""Benchmarks, side by side with what users would otherwise use; not part of the test suite.

Run them all with ``python -m bench`` (``--quick`` for a smoke run); one pair with
``python -m bench --only context`` (or ``tracker``, ``wrapper``, ``store``). Results are
printed as tables and written to ``bench/results/latest.json``.
"""
