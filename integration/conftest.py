"""Fixtures for the integration suite: a fresh stateful mock Responses API per test.

Also the session's summaries (the interruption matrix's counts, the campaign's verdict), which
under pytest-xdist are made in the workers and printed by the controller.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import set_tracing_disabled

from ._report import PLUGIN_NAME, SESSION_SUMMARY, Tally

set_tracing_disabled(True)


_summaries: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep the summary a test left (on the controller, xdist hands it every report)."""
    if report.when == "call":  # the setup and teardown reports carry the same properties
        _summaries.extend(t for name, t in report.user_properties if name == SESSION_SUMMARY)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Print the kept summaries, once, where the terminal is."""
    if not hasattr(config, "workerinput"):
        for text in _summaries:
            terminalreporter.write_line(text)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the matrix counts to the controller."""
    tally = session.config.pluginmanager.get_plugin(PLUGIN_NAME)
    output = getattr(session.config, "workeroutput", None)
    if isinstance(tally, Tally) and output is not None:
        output[PLUGIN_NAME] = tally.to_dict()


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the controller: add a finished worker's matrix counts to the session's Tally."""
    counts = getattr(node, "workeroutput", {}).get(PLUGIN_NAME)
    if counts is None:
        return
    plugins = node.config.pluginmanager
    tally = plugins.get_plugin(PLUGIN_NAME)
    if tally is None:
        tally = Tally()
        plugins.register(tally, PLUGIN_NAME)
    tally.merge(counts)


@pytest.fixture(autouse=True)
def no_secret_in_any_envelope(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every envelope the suite writes is checked: no API key (the mock's clients use sk-…)."""
    from agents_state_ext import _persistence as persistence

    written: list[str] = []
    real = persistence.dump_state

    def checked(*args: Any, **kwargs: Any) -> str:
        blob = real(*args, **kwargs)
        assert "sk-" not in blob, "an API key was written into a state envelope"
        written.append(blob)
        return blob

    monkeypatch.setattr(persistence, "dump_state", checked)
    yield written
