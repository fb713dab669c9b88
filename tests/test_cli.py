"""The CLI: demo, inspect and chat run offline; bad input is one line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agents_state_ext.cli import main

STRATEGIES = ("replay", "session", "previous_response", "conversation")
OFFLINE = {"OPENAI_API_KEY": ""}


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, env=OFFLINE)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    db = tmp_path_factory.mktemp("demo") / "demo.sqlite3"
    return db, run("demo", "--db", str(db))


def one_error_line(result: Result) -> str:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output + result.stderr
    return lines[0]


def test_demo_runs_offline_through_every_action_and_strategy(
    demo_db: tuple[Path, Result],
) -> None:
    db, result = demo_db
    assert result.exit_code == 0, result.output + result.stderr
    out = result.stdout
    for strategy in STRATEGIES:
        assert f"== {strategy}" in out
    for action in ("send", "stop", "retry", "edit", "switch"):
        assert f"  {action} " in out
    assert "cancelled" in out and "invalid" in out and "OVERFLOW (not sent)" in out
    assert "previous_response_id=resp_1" in out and "conversation=conv_2" in out
    assert db.is_file()


def test_inspect_shows_the_demo_graphs_and_attempts(demo_db: tuple[Path, Result]) -> None:
    db, _ = demo_db
    result = run("inspect", str(db))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("strategy=") == 4
    assert "attempts of chat_" in result.stdout
    for status in ("complete", "cancelled", "invalid", "failed"):
        assert status in result.stdout

    data = json.loads(run("inspect", str(db), "--json").stdout)
    chats = data["conversations"]
    assert [c["strategy"] for c in chats] == list(STRATEGIES)
    statuses = [r["status"] for r in chats[2]["attempts"]]
    assert statuses == [
        "complete",
        "cancelled",
        "complete",
        "complete",
        "complete",
        "complete",
        "failed",
    ]
    one = run("inspect", str(db), chats[3]["id"][:12], "--json")
    assert [c["id"] for c in json.loads(one.stdout)["conversations"]] == [chats[3]["id"]]


def test_chat_send_stop_retry_edit_through_stdin(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    script = "hi\ntell me a story\n/stop\n/retry\n/edit 4 tell me a poem\n/branches\n/quit\n"
    result = run("chat", "--db", str(db), "--strategy", "previous_response", input=script)
    assert result.exit_code == 0, result.output + result.stderr
    assert "offline mock" in result.stdout
    assert "You said: tell me a poem" in result.stdout

    data = json.loads(run("inspect", str(db), "--json").stdout)["conversations"][0]
    assert [r["status"] for r in data["attempts"]] == [
        "complete",
        "cancelled",
        "complete",
        "complete",
    ]
    nodes = {n["id"]: n for n in data["graph"]["nodes"]}
    head = nodes[data["head"]]
    assert head["status"] == "complete"
    assert nodes[head["parent_id"]]["items"][0]["content"] == "tell me a poem"
    records = data["attempts"]
    assert records[3]["cursor_before"] == records[0]["response_id"]  # the edit forks the chain


def test_chat_commands_report_bad_arguments_and_go_on() -> None:
    script = "/budget 0\n/switch nope\n/edit 9 x\n/frobnicate\n/budget 5\nhi\n"
    result = run("chat", "--strategy", "replay", input=script)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "positive integer" in out and "matches nothing" in out and "unknown command" in out
    assert "OVERFLOW" not in out and "budget: 5 tokens" in out
    assert "need" in out and "over the budget of 5" in out  # "hi" + system overflow 5 tokens


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("inspect", "missing.sqlite3"), "no such database file"),
        (("chat", "--budget", "0"), "positive integer"),
        (("chat", "--budget", "lots"), "positive integer"),
        (("chat", "--db", "missing.sqlite3", "--conversation", "c1"), "no such database file"),
        (("chat", "--strategy", "telepathy"), "telepathy"),
        (("demo", "--db", "no/such/folder/demo.sqlite3"), "does not exist"),
        (("frobnicate",), "No such command"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(
    args: tuple[str, ...], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the relative paths above must not exist
    assert needle in one_error_line(run(*args))


def test_unknown_conversation_and_node_ids_are_one_line(demo_db: tuple[Path, Result]) -> None:
    db, _ = demo_db
    assert "no conversation 'nope'" in one_error_line(run("inspect", str(db), "nope"))
    line = one_error_line(run("chat", "--db", str(db), "--conversation", "nope"))
    assert "nope" in line


def test_chat_shows_a_pending_approval_and_takes_approve_and_reject(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    script = "delete a.txt\nhi\n/approve\ndelete b.txt\n/reject call_2 not today\n/quit\n"
    result = run("chat", "--db", str(db), "--strategy", "replay", input=script)
    assert result.exit_code == 0, result.output + result.stderr
    out = result.stdout
    assert out.count("awaiting approval:") == 2
    assert 'delete_file({"path": "a.txt"})  [undecided]' in out
    assert "error: cannot send: attempt" in out  # "hi" waits: a call awaits a decision
    assert "call_1 delete_file: approved" in out and "(pretend) deleted a.txt" in out
    assert "call_2 delete_file: rejected" in out and "The tool answered: not today" in out

    # A pause outlives the process: reopened, the chat shows it and takes the decision.
    first = run("chat", "--db", str(db), "--strategy", "session", input="delete c.txt\n/quit\n")
    chats = json.loads(run("inspect", str(db), "--json").stdout)["conversations"]
    later = run("chat", "--db", str(db), "--conversation", chats[1]["id"], input="/reject\n/quit\n")
    assert first.exit_code == later.exit_code == 0, later.output + later.stderr
    assert later.stdout.index("awaiting approval:") < later.stdout.index("you>")
    assert "rejected" in later.stdout and "The tool answered:" in later.stdout

    data = json.loads(run("inspect", str(db), "--json").stdout)["conversations"]
    decisions = [
        [(a["tool_name"], a["decision"]) for a in r["approvals"]]
        for chat in data
        for r in chat["attempts"]
    ]
    assert decisions == [
        [("delete_file", "approved")],
        [("delete_file", "rejected")],
        [("delete_file", "rejected")],
    ]
    assert [r["status"] for chat in data for r in chat["attempts"]] == ["complete"] * 3


def test_version_is_the_package_version() -> None:
    from importlib.metadata import version

    import agents_state_ext

    for flag in ("--version", "-V"):
        result = run(flag)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == f"agents-state-ext {agents_state_ext.__version__}\n"
    assert agents_state_ext.__version__ == version("agents-state-ext")
