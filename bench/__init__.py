"""Micro-benchmarks; run one with ``python -m bench.<name>``. Not part of the test suite."""
