"""However the app is started, it knows where it listens (issue 28): the documented uvicorn path.

``uvicorn --factory agents_state_ext.server.app:app_from_env --host 0.0.0.0`` with no token
used to start silently (the check saw only ``AGENTS_STATE_EXT_HOST``), and with tokens it
answered 421 to the very addresses it was bound to. Now the uvicorn command line is the
address checked and served; each case runs the real ``python -m uvicorn`` (or ``serve``, and
the commands docs/serve.md shows against it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from _served import APP_FACTORY, ServedProcess, command, environment

from agents_state_ext.server import app_from_env
from agents_state_ext.server.launch import uvicorn_host

SECRET = "alice-secret-0001"


def test_the_uvicorn_command_line_names_the_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UVICORN_HOST", raising=False)
    for argv, host in (
        (["/venv/bin/uvicorn", "--factory", APP_FACTORY, "--host", "0.0.0.0"], "0.0.0.0"),
        (["/lib/uvicorn/__main__.py", APP_FACTORY, "--host=::"], "::"),
        (["/venv/bin/uvicorn", APP_FACTORY], "127.0.0.1"),  # uvicorn's default
        (["/venv/bin/uvicorn", APP_FACTORY, "--fd", "3"], None),  # bound elsewhere: unknown
        (["/venv/bin/uvicorn", APP_FACTORY, "--uds", "/run/chat.sock"], None),
        (["/venv/bin/agents-state-ext", "serve", "--host", "0.0.0.0"], None),  # serve checks
        (["/venv/bin/gunicorn", "-k", "uvicorn.workers.UvicornWorker"], None),
    ):
        assert uvicorn_host(argv) == host, argv
    monkeypatch.setenv("UVICORN_HOST", "10.1.2.3")
    assert uvicorn_host(["/venv/bin/uvicorn", APP_FACTORY]) == "10.1.2.3"

    monkeypatch.delenv("AGENTS_STATE_EXT_TOKENS", raising=False)
    monkeypatch.delenv("AGENTS_STATE_EXT_HOST", raising=False)
    monkeypatch.setattr("sys.argv", ["/venv/bin/uvicorn", "--factory", APP_FACTORY, "--host", "::"])
    with pytest.raises(ValueError, match="refusing to listen on :: without --token"):
        app_from_env()


def test_uvicorn_on_every_address_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    args = ["uvicorn", "--factory", APP_FACTORY, "--host", "0.0.0.0"]
    result = subprocess.run(
        command(args, 0),
        capture_output=True,
        text=True,
        env=environment({"AGENTS_STATE_EXT_STORE": str(tmp_path / "chat.db")}),
        cwd=tmp_path,
        timeout=120,  # before the fix it served until killed
    )
    assert result.returncode != 0
    assert "refusing to listen on 0.0.0.0 without --token" in result.stderr
    assert not (tmp_path / "chat.db").exists()  # refused before it opened anything


def test_uvicorn_on_every_address_with_a_token_answers_its_addresses_only(tmp_path: Path) -> None:
    args = ["uvicorn", "--factory", APP_FACTORY, "--host", "0.0.0.0", "--log-level", "warning"]
    env = {"AGENTS_STATE_EXT_TOKENS": f"alice={SECRET}", "AGENTS_STATE_EXT_STORE": "chat.db"}
    with ServedProcess(args, tmp_path, env) as served:
        auth = {"authorization": f"Bearer {SECRET}"}
        with httpx.Client(base_url=served.url, timeout=30, headers=auth) as http:
            # what a LAN client of 0.0.0.0 sends: an address of the machine in Host
            lan = {"host": f"192.0.2.10:{served.port}"}
            created = http.post("/api/conversations", json={}, headers=lan)
            assert created.status_code == 201, created.text
            listed = http.get("/api/conversations", headers=lan).json()["conversations"]
            assert [c["id"] for c in listed] == [created.json()["id"]]
            rebound = {"host": f"rebind.test:{served.port}"}
            assert http.get("/api/conversations", headers=rebound).status_code == 421


def test_serve_takes_its_secrets_from_a_file_and_the_environment_not_its_command_line(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# the team\nalice={SECRET}\n")
    store = tmp_path / "from-env.db"
    args = ["serve", "--token-file", str(tokens), "--log-level", "warning"]
    with ServedProcess(args, tmp_path, {"AGENTS_STATE_EXT_STORE": str(store)}) as served:
        assert served.process is not None
        cmdline = Path(f"/proc/{served.process.pid}/cmdline")
        if cmdline.exists():  # what ps shows, on Linux
            assert SECRET.encode() not in cmdline.read_bytes()
        listed = httpx.get(f"{served.url}/api/conversations", timeout=30)
        assert listed.status_code == 401
        auth = {"authorization": f"Bearer {SECRET}"}
        created = httpx.post(f"{served.url}/api/conversations", json={}, headers=auth, timeout=30)
        assert created.status_code == 201
    assert store.exists()


def test_the_documented_curl_commands_work(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("needs curl")
    doc = (Path(__file__).parents[1] / "docs" / "serve.md").read_text()
    block = doc.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if not line.startswith("agents-state-ext")]
    with ServedProcess(["serve", "--log-level", "warning"], tmp_path) as served:
        script = "\n".join(commands).replace("localhost:8000", f"127.0.0.1:{served.port}")
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert "event: record" in result.stdout
    assert '"text":"hello"' in result.stdout.replace(" ", "")  # the tree holds the message
