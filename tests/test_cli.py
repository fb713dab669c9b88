"""The CLI: demo, inspect and chat run offline; bad input is one line, never a traceback."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    assert "cancelled" in out and "invalid" in out
    assert "refused: 0 requests sent, 0 attempts stored" in out
    assert "previous_response_id=resp_1" in out and "conversation=conv_2" in out
    assert db.is_file()


def test_inspect_shows_the_demo_graphs_and_attempts(demo_db: tuple[Path, Result]) -> None:
    db, _ = demo_db
    result = run("inspect", str(db))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("strategy=") == 4
    assert "attempts of chat_" in result.stdout
    for status in ("complete", "cancelled", "invalid"):
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
    ]  # the send over the budget was refused: no attempt of it
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


# -- store commands: inspect (read-only), export, import, delete ------------------------------


def numbered() -> Callable[[str], str]:
    """Readable ids, counted per prefix: msg1, msg2, att1, ..."""
    counters: dict[str, itertools.count[int]] = {}
    return lambda prefix: f"{prefix}{next(counters.setdefault(prefix, itertools.count(1)))}"


def build_db(path: Path, *, chats: int = 2, broken: bool = False) -> Path:
    """A SQLite store with ``chats`` small chats (chat_1, ...), built through the store API.

    ``broken``: chat_1's first message is rewritten to have its own answer as parent (a cycle).
    """
    import asyncio

    from agents_state_ext._attempts import AttemptRecord
    from agents_state_ext._graph import ConversationGraph
    from agents_state_ext.stores import SQLiteStore

    async def fill() -> None:
        store = SQLiteStore(path)
        try:
            for number in range(1, chats + 1):
                cid = f"chat_{number}"
                graph = ConversationGraph(cid, id_factory=numbered())
                await store.create_conversation(cid, strategy="previous_response", meta={})
                user = graph.add_user(f"hello {number}")
                answer = graph.start_attempt()
                graph.complete(answer.id, meta={"response_id": f"resp_{number}"})
                record = AttemptRecord(
                    answer.id, str(answer.attempt_id), user.id, status="complete",
                    response_id=f"resp_{number}", started_at=float(number),
                )  # fmt: skip
                await store.commit(
                    cid, graph.take_changes(), expected_head=None, new_head=answer.id,
                    attempts=[record],
                )  # fmt: skip
                if broken and number == 1:
                    user.parent_id = answer.id
                    await store.commit(cid, [user], expected_head=answer.id, new_head=answer.id)
        finally:
            await store.aclose()

    asyncio.run(fill())
    return path


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` and the sha256 of its bytes."""
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def sqlite_tables(path: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]


def test_inspect_and_export_never_change_the_file(tmp_path: Path) -> None:
    db = build_db(tmp_path / "chats.sqlite3")
    before = fingerprint(tmp_path)
    shown = run("inspect", str(db))
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.count("strategy=previous_response") == 2
    assert "attempts of chat_2" in shown.stdout and "resp_2" in shown.stdout
    data = json.loads(run("inspect", str(db), "chat_2", "--json").stdout)
    assert [c["id"] for c in data["conversations"]] == ["chat_2"]
    assert data["conversations"][0]["head"] == "msg2"
    assert run("export", str(db), "chat_1").exit_code == 0
    after = fingerprint(tmp_path)
    assert after[db.name] == before[db.name]
    # A reader of a WAL database may leave SQLite's own (empty) side files, never data.
    assert set(after) - set(before) <= {f"{db.name}-wal", f"{db.name}-shm"}
    assert (
        not (tmp_path / f"{db.name}-wal").exists()
        or not (tmp_path / f"{db.name}-wal").stat().st_size
    )


def foreign_db(path: Path) -> Path:
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    return path


@pytest.mark.parametrize("command", ["inspect", "export"])
@pytest.mark.parametrize("kind", ["foreign", "empty file", "empty database", "not sqlite"])
def test_read_only_commands_refuse_what_is_not_a_store_and_change_nothing(
    command: str, kind: str, tmp_path: Path
) -> None:
    import sqlite3

    db = tmp_path / "other.db"
    if kind == "foreign":
        foreign_db(db)
    elif kind == "empty file":
        db.write_bytes(b"")
    elif kind == "empty database":
        with sqlite3.connect(db) as conn:  # a valid SQLite file without a table
            conn.execute("CREATE TABLE t (x)")
            conn.execute("DROP TABLE t")
        conn.close()
        assert db.stat().st_size > 0 and sqlite_tables(db) == []
    else:
        db.write_text("just some text, long enough to look like a file header " * 4)
    before = fingerprint(tmp_path)
    args = (command, str(db)) if command == "inspect" else (command, str(db), "chat_1")
    line = one_error_line(run(*args))
    assert str(db) in line or "database" in line
    assert fingerprint(tmp_path) == before
    if kind == "foreign":
        assert sqlite_tables(db) == ["invoices"]


def test_a_corrupted_graph_is_one_line(tmp_path: Path) -> None:
    db = build_db(tmp_path / "broken.sqlite3", broken=True)
    line = one_error_line(run("inspect", str(db)))
    assert "chat_1" in line
    assert "chat_1" in one_error_line(run("export", str(db), "chat_1"))
    assert run("inspect", str(db), "chat_2").exit_code == 0  # the other chat still shows


def test_export_then_import_into_a_new_store(tmp_path: Path) -> None:
    source = build_db(tmp_path / "source.sqlite3")
    target = tmp_path / "target.sqlite3"
    exported = run("export", str(source), "chat_1")
    assert exported.exit_code == 0, exported.stderr
    document = json.loads(exported.stdout)
    assert document["format"] == "agents-state-ext/conversation"
    doc_file = tmp_path / "chat_1.json"
    written = run("export", str(source), "chat_", "-o", str(doc_file))  # a prefix: ambiguous
    assert written.exit_code != 0 and "ambiguous" in written.stderr
    written = run("export", str(source), "chat_1", "-o", str(doc_file))
    assert written.exit_code == 0, written.stderr
    assert "exported chat_1 (2 messages, 1 attempts)" in written.stdout
    assert json.loads(doc_file.read_text(encoding="utf-8")) == document

    imported = run("import", str(target), str(doc_file))
    assert (imported.exit_code, imported.stdout) == (0, f"imported chat_1 into {target}\n")
    again = one_error_line(run("import", str(target), str(doc_file)))
    assert "'chat_1' already exists" in again
    renamed = CliRunner().invoke(
        main, ["import", str(target), "-", "--as", "copy"], input=exported.stdout, env=OFFLINE
    )
    assert renamed.exit_code == 0, renamed.stderr

    def shown(db: Path, cid: str) -> dict[str, Any]:
        data = json.loads(run("inspect", str(db), cid, "--json").stdout)["conversations"][0]
        del data["created_at"], data["id"], data["graph"]["conversation_id"]
        return dict(data)

    assert shown(target, "chat_1") == shown(source, "chat_1") == shown(target, "copy")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "is not a JSON document"),
        ('{"format": "agents-state-ext/conversation", "version": 9}', "unsupported version 9"),
        ("[]", "conversation document: document: expected an object"),
    ],
)
def test_import_refuses_a_bad_document_and_writes_nothing(
    content: str, needle: str, tmp_path: Path
) -> None:
    db = build_db(tmp_path / "store.sqlite3", chats=1)
    doc = tmp_path / "doc.json"
    doc.write_text(content, encoding="utf-8")
    assert needle in one_error_line(run("import", str(db), str(doc)))
    shown = json.loads(run("inspect", str(db), "--json").stdout)["conversations"]
    assert [c["id"] for c in shown] == ["chat_1"]


def test_delete_removes_one_chat(tmp_path: Path) -> None:
    db = build_db(tmp_path / "store.sqlite3")
    deleted = run("delete", str(db), "chat_1")
    assert (deleted.exit_code, deleted.stdout) == (0, f"deleted chat_1 from {db}\n")
    shown = json.loads(run("inspect", str(db), "--json").stdout)["conversations"]
    assert [c["id"] for c in shown] == ["chat_2"]
    assert "no conversation 'chat_1'" in one_error_line(run("delete", str(db), "chat_1"))
    assert "no conversation 'chat_'" in one_error_line(run("delete", str(db), "chat_"))
    assert "no such database file" in one_error_line(run("delete", str(tmp_path / "x.db"), "c"))


def test_delete_server_needs_an_api_key_and_changes_nothing_without_it(tmp_path: Path) -> None:
    db = build_db(tmp_path / "store.sqlite3")
    before = fingerprint(tmp_path)
    assert "OPENAI_API_KEY" in one_error_line(run("delete", str(db), "chat_1", "--server"))
    assert fingerprint(tmp_path) == before


def test_delete_server_deletes_the_stored_responses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from agents_state_ext.cli import transfer
    from agents_state_ext.testing import MockResponsesAPI

    db = build_db(tmp_path / "store.sqlite3")
    with MockResponsesAPI() as mock:

        async def respond() -> list[str]:
            client = mock.client()
            return [(await client.responses.create(model="m", input="x")).id for _ in range(2)]

        assert asyncio.run(respond()) == ["resp_1", "resp_2"]
        mock.expire_response("resp_2")
        monkeypatch.setattr(transfer, "server_client", mock.client)
        result = run("delete", str(db), "chat_1", "--server")
        assert result.exit_code == 0, result.stderr
        assert "1 responses and 0 conversations deleted, 0 already gone" in result.stdout
        deletes = [(r.method, r.path, r.status) for r in mock.requests if r.method != "POST"]
        assert deletes == [("DELETE", "/responses/resp_1", 200)]
        assert mock.response_ids == []
        result = run("delete", str(db), "chat_2", "--server")
        assert "0 responses and 0 conversations deleted, 1 already gone" in result.stdout
    assert json.loads(run("inspect", str(db), "--json").stdout)["conversations"] == []


@pytest.mark.parametrize("command", ["inspect", "export", "import", "delete", "replay"])
def test_every_store_command_has_help(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0, result.stderr
    assert "STORE is a SQLite file or a store URL" in result.stdout
    assert f"Usage: main {command} [OPTIONS] STORE" in result.stdout


def test_store_urls_move_a_chat_from_sqlite_to_another_store(tmp_path: Path) -> None:
    source = build_db(tmp_path / "source.sqlite3", chats=1)
    document = tmp_path / "chat.json"
    url = f"sqlite:///{source.resolve()}"
    assert run("export", url, "chat_1", "-o", str(document)).exit_code == 0
    target = f"sqlite:///{(tmp_path / 'target.sqlite3').resolve()}"
    assert run("import", target, str(document)).exit_code == 0
    shown = json.loads(run("inspect", target, "--json").stdout)["conversations"]
    assert [c["id"] for c in shown] == ["chat_1"]
    missing = f"sqlite:///{(tmp_path / 'missing.sqlite3').resolve()}"
    assert "does not exist" in one_error_line(run("inspect", missing))
    assert not (tmp_path / "missing.sqlite3").exists()


def test_a_chat_moves_from_sqlite_to_postgresql(tmp_path: Path) -> None:
    from _backends import postgres_url, unique_name

    url = postgres_url()
    import psycopg

    schema = unique_name("cli")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        on_schema = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
        source = build_db(tmp_path / "source.sqlite3", chats=1)
        exported = run("export", str(source), "chat_1")
        moved = CliRunner().invoke(main, ["import", on_schema, "-"], input=exported.stdout)
        assert moved.exit_code == 0, moved.stderr
        back = run("export", on_schema, "chat_1")
        assert back.exit_code == 0, back.stderr
        before, after = json.loads(exported.stdout), json.loads(back.stdout)
        del before["conversation"]["created_at"], after["conversation"]["created_at"]
        assert after == before
        assert run("delete", on_schema, "chat_1").exit_code == 0
        assert json.loads(run("inspect", on_schema, "--json").stdout) == {"conversations": []}
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_failed_import_into_a_new_file_leaves_no_file(tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text('{"format": "agents-state-ext/conversation", "version": 1}', encoding="utf-8")
    before = fingerprint(tmp_path)
    assert "conversation document" in one_error_line(
        run("import", str(tmp_path / "new.db"), str(doc))
    )
    assert fingerprint(tmp_path) == before
