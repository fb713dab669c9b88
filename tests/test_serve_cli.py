"""``serve --agent module:attr`` (as ``chat`` and ``replay`` take it); help a wheel reaches."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agents_state_ext.cli import main

OFFLINE = {"OPENAI_API_KEY": ""}
pytestmark = pytest.mark.anyio


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=OFFLINE)


def test_serve_help_names_agent_and_documentation_a_wheel_reaches() -> None:
    result = run("serve", "--help")
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "--agent MODULE:ATTR" in text
    assert "python -m pydoc agents_state_ext.server" in text
    assert "https://" not in text  # no invented public URL


def test_the_pydoc_page_serve_help_names_lists_the_routes() -> None:
    import pydoc

    import agents_state_ext.server as server

    text = pydoc.render_doc(server, renderer=pydoc.plaintext)
    for method, path, _ in server.ROUTES:
        assert f"{method:<7}{path}" in text
    assert "python -m pydoc agents_state_ext.server.config" in text


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nocolon", "expected MODULE:ATTR"),
        ("no_such_module_27:agent", "cannot import 'no_such_module_27'"),
        ("os:sep", "is a str, not an agents.Agent"),
    ],
)
def test_a_bad_agent_is_one_line_before_anything_starts(spec: str, message: str) -> None:
    result = run("serve", "--agent", spec, "--port", "1")
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line, result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("mock_url", [None, "http://127.0.0.1:9/v1"])
async def test_each_worker_serves_the_agent_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mock_url: str | None
) -> None:
    from agents import Model

    from agents_state_ext.server import ServeSettings
    from agents_state_ext.server.runtime import open_resources

    module = tmp_path / "served_agent_27.py"
    module.write_text(
        textwrap.dedent(
            """
            from agents import Agent

            def make():
                return Agent(name="pirate", instructions="Talk like a pirate.")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    given = ServeSettings(
        store=str(tmp_path / "served.db"), mock_url=mock_url, agent="served_agent_27:make"
    )
    settings = ServeSettings.from_env({**given.to_env(), **OFFLINE})  # what a worker reads
    assert settings.agent == "served_agent_27:make"
    async with open_resources(settings) as resources:
        assert resources.agent.name == "pirate"
        assert resources.agent.instructions == "Talk like a pirate."
        assert isinstance(resources.agent.model, Model)  # bound to the served model source


async def test_a_worker_given_a_bad_agent_raises_the_librarys_error(tmp_path: Path) -> None:
    """Started without the CLI (uvicorn's factory), a bad agent is a typed error, not click's."""
    import click

    from agents_state_ext import AgentSpecError, StateExtError
    from agents_state_ext.server import ServeSettings
    from agents_state_ext.server.runtime import open_resources

    given = ServeSettings(store=str(tmp_path / "served.db"), agent="os:sep")
    settings = ServeSettings.from_env({**given.to_env(), **OFFLINE})
    with pytest.raises(AgentSpecError, match=r"is a str, not an agents\.Agent") as raised:
        async with open_resources(settings):
            pass
    assert isinstance(raised.value, StateExtError) and isinstance(raised.value, ValueError)
    assert not isinstance(raised.value, click.ClickException)
