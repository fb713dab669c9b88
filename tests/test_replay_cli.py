"""Replay from a terminal: the chat's ``/replay`` and the ``replay`` command, on reopened files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from test_cli import one_error_line
from test_plain_install import CLI as PLAIN_CLI

from agents_state_ext.cli import main

OFFLINE = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, env=OFFLINE)


def stored(db: Path) -> dict[str, Any]:
    shown = run("inspect", str(db), "--json")
    assert shown.exit_code == 0, shown.stderr
    [chat] = json.loads(shown.stdout)["conversations"]
    return dict(chat)


def test_replay_in_a_reopened_chat_is_identical_or_says_what_it_overrode(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    first = run("chat", "--db", str(db), "--strategy", "replay", input="hi\nagain\n")
    assert first.exit_code == 0, first.stderr
    chat = stored(db)
    original = chat["attempts"][-1]
    script = (
        f"/replay {original['attempt_id'][:10]}\n"
        f"/replay {original['attempt_id']} temperature=0.9 model=gpt-4o\n"
        "/replay\n"
        f"/replay {original['attempt_id']} colour=blue\n"
    )
    second = run("chat", "--db", str(db), "--conversation", chat["id"], input=script)
    assert second.exit_code == 0, second.stderr
    out = second.stdout
    assert "identical request" in out and "request differs" in out
    assert "overridden: model, settings overridden" in out
    assert "usage: /replay A" in second.stderr + out
    assert "unknown replay option 'colour'" in second.stderr + out
    attempts = stored(db)["attempts"]
    replays = [r for r in attempts if r["replay_of"] == original["attempt_id"]]
    assert [r["model"] for r in replays] == [original["model"], "gpt-4o"]
    assert replays[0]["request_digest"] == original["request_digest"]
    assert replays[1]["sampling"]["temperature"] == 0.9
    assert {r["parent_user_id"] for r in replays} == {original["parent_user_id"]}


# -- the top-level command: ``agents-state-ext replay STORE ATTEMPT`` ---------------------------

REPLAY_KEYS = {
    "answer",
    "conversation_id",
    "differences",
    "error",
    "explain",
    "identical",
    "logs",
    "message_id",
    "obstacles",
    "original",
    "records",
    "replayed",
    "status",
}


@pytest.fixture
def chat_db(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A file a real offline chat wrote (replay strategy, two turns), and what it holds."""
    db = tmp_path / "chat.sqlite3"
    made = run("chat", "--db", str(db), "--strategy", "replay", input="hi\nagain\n")
    assert made.exit_code == 0, made.stderr
    return db, stored(db)


def replays_of(db: Path, attempt_id: str) -> list[dict[str, Any]]:
    return [r for r in stored(db)["attempts"] if r["replay_of"] == attempt_id]


def test_replay_command_in_a_fresh_process_sends_the_identical_request(
    chat_db: tuple[Path, dict[str, Any]],
) -> None:
    db, chat = chat_db
    original = chat["attempts"][-1]
    # A new interpreter, as a plain install has it: httpx and respx cannot be imported.
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_CLI, "replay", str(db), original["attempt_id"][:10]],
        cwd=db.parent,
        capture_output=True,
        text=True,
        env={**OFFLINE, "PATH": "", "PYTHONPATH": str(Path(__file__).parents[1])},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [replayed] = replays_of(db, original["attempt_id"])
    assert replayed["request_digest"] == original["request_digest"]
    assert replayed["status"] == "complete"
    assert replayed["parent_user_id"] == original["parent_user_id"]
    assert f"replay of {original['attempt_id']} as {replayed['attempt_id']}" in done.stdout
    assert "identical request" in done.stdout
    assert "assistant> (offline mock) You said: again." in done.stdout


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_replay_command_json_says_identical_and_names_the_new_attempt(
    chat_db: tuple[Path, dict[str, Any]], stream: str
) -> None:
    db, chat = chat_db
    original = chat["attempts"][-1]
    result = run("replay", str(db), original["attempt_id"], stream, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == REPLAY_KEYS
    [replayed] = replays_of(db, original["attempt_id"])
    assert data["identical"] is True
    assert data["obstacles"] == [] and data["differences"] == []
    assert (data["original"], data["replayed"]) == (original["attempt_id"], replayed["attempt_id"])
    assert data["message_id"] == replayed["message_id"]
    assert data["conversation_id"] == chat["id"]
    assert (data["status"], data["error"]) == ("complete", None)
    assert data["answer"].startswith("(offline mock) You said: again.")
    assert data["records"]["original"] == original
    assert data["records"]["replayed"] == replayed
    assert replayed["request_digest"] == original["request_digest"]


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_replay_command_with_overrides_reports_them(
    chat_db: tuple[Path, dict[str, Any]], stream: str
) -> None:
    db, chat = chat_db
    original = chat["attempts"][-1]
    ref = original["message_id"]  # an assistant message id names its attempt too
    args = ("replay", str(db), ref, "--model", "gpt-4o", "--temperature", "0.3", stream)
    shown = run(*args)
    assert shown.exit_code == 0, shown.stderr
    assert "request differs" in shown.stdout
    assert "overridden: model, settings overridden" in shown.stdout
    assert "model: 'gpt-4.1' -> 'gpt-4o'" in shown.stdout
    data = json.loads(run(*args, "--json").stdout)
    assert data["identical"] is False
    assert data["obstacles"] == [{"kind": "overridden", "detail": "model, settings overridden"}]
    assert {"model", "sampling.temperature"} <= set(data["differences"])
    replayed = replays_of(db, original["attempt_id"])
    assert [r["model"] for r in replayed] == ["gpt-4o", "gpt-4o"]
    assert [r["sampling"]["temperature"] for r in replayed] == [0.3, 0.3]
    assert all(r["request_digest"] != original["request_digest"] for r in replayed)


def test_replay_command_reads_a_store_url_and_picks_the_chat_of_a_demo_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "demo.sqlite3"
    assert run("demo", "--db", str(db)).exit_code == 0
    chats = json.loads(run("inspect", str(db), "--json").stdout)["conversations"]
    [replay_chat] = [c for c in chats if c["strategy"] == "replay"]
    before = len(replay_chat["attempts"])
    # The demo numbers attempts per chat: att_6 is in every one of its four chats.
    several = run("replay", str(db), "att_6")
    assert "name one with --conversation" in one_error_line(several)
    # The demo's agent has no tools; the same agent, given with --agent, sends the same request.
    (tmp_path / "toolless_agent.py").write_text(
        "from agents import Agent\n\nagent = Agent(name='assistant')\n"
    )
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{db}"
    args = ("replay", url, "att_6", "--conversation", replay_chat["id"][:12], "--json")
    same = run(*args, "--agent", "toolless_agent:agent")
    assert same.exit_code == 0, same.stderr
    assert json.loads(same.stdout)["identical"] is True
    # The built-in chat agent carries a tool the demo's did not: the report says so.
    other = json.loads(run(*args).stdout)
    assert other["identical"] is False
    assert [o["kind"] for o in other["obstacles"]] == ["tools_changed"]
    assert other["differences"] == ["tools"]
    after = [c for c in json.loads(run("inspect", str(db), "--json").stdout)["conversations"]]
    assert [len(c["attempts"]) for c in after if c["id"] == replay_chat["id"]] == [before + 2]


def test_replay_command_bad_input_is_one_error_line_and_writes_nothing(
    chat_db: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, chat = chat_db
    ids = [r["attempt_id"] for r in chat["attempts"]]
    unknown = one_error_line(run("replay", str(db), "att_nope"))
    assert unknown == f"error: no attempt 'att_nope' in {db}"
    ambiguous = one_error_line(run("replay", str(db), "att_"))
    assert "is ambiguous" in ambiguous
    assert all(i[:12] in ambiguous for i in ids)
    missing = one_error_line(run("replay", str(tmp_path / "nope.db"), ids[0]))
    assert missing == f"error: no such database file: {tmp_path / 'nope.db'}"
    no_chat = one_error_line(run("replay", str(db), ids[0], "--conversation", "chat_nope"))
    assert "no conversation 'chat_nope'" in no_chat
    hot = one_error_line(run("replay", str(db), ids[0], "--temperature", "hot"))
    assert "--temperature" in hot
    bad_agent = one_error_line(run("replay", str(db), ids[0], "--agent", "no_colon"))
    assert "expected MODULE:ATTR" in bad_agent
    assert stored(db)["attempts"] == chat["attempts"]


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_replay_command_on_a_new_mock_says_the_chain_expired(tmp_path: Path, stream: str) -> None:
    db = tmp_path / "chained.sqlite3"
    made = run("chat", "--db", str(db), "--strategy", "previous_response", input="hi\nagain\n")
    assert made.exit_code == 0, made.stderr
    original = stored(db)["attempts"][-1]
    assert original["cursor_before"] is not None
    # Another run of the command starts another mock, which never saw the recorded chain.
    result = run("replay", str(db), original["attempt_id"], stream, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["identical"] is False and data["status"] == "complete"
    kinds = [o["kind"] for o in data["obstacles"]]
    assert kinds == ["chain_expired"]
    assert original["cursor_before"] in data["obstacles"][0]["detail"]
    [replayed] = replays_of(db, original["attempt_id"])
    assert replayed["reseeded_from"] == original["cursor_before"]
    assert data["answer"].startswith("(offline mock) You said: again.")


def test_replay_command_of_a_tool_call_waits_for_approval_in_the_chat(tmp_path: Path) -> None:
    db = tmp_path / "tools.sqlite3"
    made = run("chat", "--db", str(db), "--strategy", "replay", input="delete notes.txt\n/reject\n")
    assert made.exit_code == 0, made.stderr
    chat = stored(db)
    [original] = chat["attempts"]
    waiting = run("replay", str(db), original["attempt_id"])
    assert waiting.exit_code == 0, waiting.stderr
    assert "identical request" in waiting.stdout
    assert "status: awaiting_approval" in waiting.stdout
    assert f"chat --db {db} --conversation {chat['id']}" in waiting.stdout
    [replayed] = replays_of(db, original["attempt_id"])
    assert replayed["approvals"][0]["tool_name"] == "delete_file"
    assert replayed["approvals"][0]["decision"] is None
    # The chat has a run waiting on a person: nothing else can start until it is decided.
    refused = one_error_line(run("replay", str(db), original["attempt_id"]))
    assert "awaits approval" in refused
    assert replays_of(db, original["attempt_id"]) == [replayed]
