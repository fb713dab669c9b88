"""Every command and the testing kit work without the ``test`` extra (no httpx, no respx).

Each case runs in a fresh interpreter where importing ``httpx`` or ``respx`` fails, as in a
plain ``pip install agents-state-ext``; ``.ci/run`` checks the same from the built wheel.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agents_state_ext

# Installed first in the child: the extras' packages become unimportable, as in a plain install.
BLOCKER = """
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"httpx", "respx"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""

CLI = (
    BLOCKER
    + """
import runpy
sys.argv = ["agents-state-ext", *sys.argv[1:]]
runpy.run_module("agents_state_ext", run_name="__main__", alter_sys=True)
"""
)

KIT = (
    BLOCKER
    + """
import asyncio
import openai
from agents import Agent, Runner, set_tracing_disabled
from agents_state_ext import ConversationState
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

set_tracing_disabled(True)
STREAMED = sys.argv[1] == "streamed"


async def run(state, agent, text):
    if not STREAMED:
        return await state.run(agent, text)
    result = state.run_streamed(agent, text)
    async for _ in result.stream_events():
        pass
    return result


async def main() -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(name="assistant", model=mock.model())
        mock.enqueue(Reply.text("Hello!"))
        assert (await Runner.run(agent, "hi")).final_output == "Hello!"
        state = ConversationState.previous_response()
        mock.inject(Fault.status(500))
        try:
            await run(state, agent, "one")
        except openai.APIStatusError as error:
            print("failed:", error.status_code)
        assert (await run(state, agent, "two")).final_output == "echo: two"
        # the failed turn is sent again, exactly once, with the new one
        said = [item["content"] for item in mock.response_requests[-1]["input"]]
        assert said == ["one", "two"], mock.response_requests
    assert not {"httpx", "respx"} & set(sys.modules)
    print("kit ok")


asyncio.run(main())
"""
)


def python(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "", "OPENAI_API_KEY": "", "PYTHONPATH": str(Path(__file__).parents[1])},
    )


def test_the_blocker_blocks(tmp_path: Path) -> None:
    result = python(BLOCKER + "import httpx2\nimport httpx", cwd=tmp_path)
    assert "No module named 'httpx'" in result.stderr


def test_help_and_version(tmp_path: Path) -> None:
    helped = python(CLI, "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    commands = ("demo", "chat", "inspect", "export", "import", "delete", "serve", "replay")
    assert all(command in helped.stdout for command in commands)
    version = python(CLI, "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"agents-state-ext {agents_state_ext.__version__}"


def test_demo_then_inspect(tmp_path: Path) -> None:
    db = tmp_path / "demo.sqlite3"
    demo = python(CLI, "demo", "--db", str(db), cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "== conversation" in demo.stdout
    inspected = python(CLI, "inspect", str(db), cwd=tmp_path)
    assert inspected.returncode == 0, inspected.stderr
    assert inspected.stdout.count("strategy=") == 4


@pytest.mark.parametrize("streamed", [False, True])
def test_the_testing_kit_with_a_real_runner(tmp_path: Path, streamed: bool) -> None:
    result = python(KIT, "streamed" if streamed else "plain", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["failed: 500", "kit ok"]


def test_the_benchmarks_import_without_the_test_extra(tmp_path: Path) -> None:
    modules = "bench.__main__, bench.bench_context, bench.bench_store, bench.bench_tracker"
    result = python(BLOCKER + f"import {modules}, bench.bench_wrapper\nprint('ok')", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
