"""``agents-state-ext chat`` as a person uses it: in a terminal (a pseudo terminal) and piped.

The terminal tests run the CLI in its own process on a pty (stdlib ``pty``), type into it and
read what the terminal shows, escape sequences removed; ``timeout`` only bounds the wait for
something that must appear.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.tracing import get_trace_provider, set_trace_provider
from agents.tracing.provider import DefaultTraceProvider
from click.testing import CliRunner, Result

from agents_state_ext.cli import main

pytestmark = pytest.mark.skipif(os.name != "posix", reason="pseudo terminals are POSIX")

OFFLINE = {"OPENAI_API_KEY": ""}
TRACING_OFF = "OPENAI_AGENTS_DISABLE_TRACING"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|[\x01\x02]")
_RECORD = re.compile(r"  ·\s+msg_\w+ (\w+)")


class Terminal:
    """The chat CLI in a child process on a pseudo terminal of 140 columns."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
        import fcntl
        import pty
        import struct
        import termios

        command = [sys.executable, "-m", "agents_state_ext", "chat", *args]
        environment = {**os.environ, "TERM": "xterm", "OPENAI_API_KEY": "", **(env or {})}
        environment.pop("NO_COLOR", None)
        # The SDK's process-wide switch: whether the child traces is the child's to decide
        # (offline or not), not something the test process happens to carry. Code run earlier
        # in the same pytest worker sets it (bench's entry point does, and never unsets it).
        environment.pop(TRACING_OFF, None)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            if cwd is not None:
                os.chdir(cwd)
            os.execve(sys.executable, command, environment)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
        self.raw = ""
        self.seen = 0  # what expect() has consumed of the text so far
        self.code: int | None = None

    @property
    def text(self) -> str:
        """Everything the terminal showed, escape sequences removed."""
        return _ESCAPES.sub("", self.raw)

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child is gone
            return False
        if not data:
            return False
        self.raw += data.decode(errors="replace")
        return True

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Wait until ``pattern`` (a regex) shows after what was already expected."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.compile(pattern).search(self.text, self.seen)
            if found:
                self.seen = found.end()
                return found
            if time.monotonic() > deadline or not self._read(0.2):
                found = re.compile(pattern).search(self.text, self.seen)
                if found:
                    self.seen = found.end()
                    return found
                raise AssertionError(f"{pattern!r} never showed; the terminal shows:\n{self.text}")

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait_reading(self, timeout: float = 30) -> None:
        """Wait until the child's main thread sleeps in its read of the terminal.

        A Ctrl-C that arrives after the prompt is shown but before readline's wait for input
        has begun is noted by Python and only acted on at the next key (CPython's readline
        loop checks signals when its wait is interrupted), so a test that sends a signal at
        the prompt first waits for the child to be waiting. Linux only; elsewhere a no-op.
        """
        wchan = Path(f"/proc/{self.pid}/wchan")
        if not wchan.exists():
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(w in wchan.read_text() for w in ("poll", "select")):
                return
            time.sleep(0.01)

    def answer(self) -> str:
        """Wait for the end of an answer (its record line); the record's status."""
        return self.expect(_RECORD.pattern).group(1)

    def wait(self, timeout: float = 60) -> int:
        """Wait until the child exits, reading everything it shows; its exit code."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                while self._read(0.05) and len(self.raw) < 10_000_000:
                    pass
                self.code = os.waitstatus_to_exitcode(status)
                return self.code
            self._read(0.1)
        raise AssertionError(f"the chat did not exit; the terminal shows:\n{self.text}")

    def close(self) -> None:
        if self.code is None:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if not done:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def open_terminal(terminals: list[Terminal], *args: str, **kwargs: Any) -> Terminal:
    terminal = Terminal(*args, **kwargs)
    terminals.append(terminal)
    terminal.expect("you> ")
    return terminal


def shown(line: str) -> str:
    """What a terminal line reads once drawn: a backspace moves back, a character overwrites."""
    cells: list[str] = []
    at = 0
    for char in _ESCAPES.sub("", line).replace("\r", ""):
        if char == "\b":
            at = max(at - 1, 0)
            continue
        cells[at : at + 1] = [char]
        at += 1
    return "".join(cells).rstrip()


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, env={**OFFLINE, **(env or {})})


@pytest.fixture(autouse=True)
def own_trace_provider() -> Iterator[None]:
    """The in-process CLI sets the SDK's process-wide tracing: on a provider of its own.

    ``chat`` offline turns tracing off for the process, and importing a user's agent module
    may install its processors; a fresh provider (no processors: nothing is exported) takes
    that, and the worker's own is put back afterwards for the tests that follow.
    """
    original = get_trace_provider()
    set_trace_provider(DefaultTraceProvider())
    try:
        yield
    finally:
        set_trace_provider(original)


def chats(db: Path) -> list[dict[str, Any]]:
    shown = run("inspect", str(db), "--json")
    assert shown.exit_code == 0, shown.stderr
    return list(json.loads(shown.stdout)["conversations"])


# -- the terminal -------------------------------------------------------------------------------


def test_the_prompt_edits_lines_and_recalls_history(terminals: list[Terminal]) -> None:
    chat = open_terminal(terminals, "--strategy", "replay")
    chat.type("helo wrld\x1b[D\x1b[D\x1b[Do\x1b[H\x1b[C\x1b[C\x1b[Cl\r")  # left, home, right
    chat.expect(r"You said: hello world\.")
    assert chat.answer() == "complete"
    chat.expect("you> ")
    chat.type("\x1b[A!\r")  # up: the line before, then edited
    chat.expect(r"You said: hello world!\.")
    chat.answer()
    chat.expect("you> ")
    chat.type("/quit\r")
    assert chat.wait() == 0
    assert "^[" not in chat.text and "\x1b[A" not in chat.raw.replace("\x1b[A!", "")


def test_a_waiting_indicator_shows_before_the_first_token_on_a_terminal_only(
    terminals: list[Terminal],
) -> None:
    chat = open_terminal(terminals, "--strategy", "replay")
    chat.type("hi\r")
    before = chat.expect(r"assistant> (.*?)\(offline mock\)").group(1)
    assert "waiting" in before
    chat.answer()
    # Erased before the answer: the line reads as the answer alone.
    line = next(ln for ln in chat.raw.splitlines() if "(offline mock)" in ln)
    assert shown(line).startswith("assistant> (offline mock) You said: hi.")
    chat.type("/quit\r")
    assert chat.wait() == 0

    piped = run("chat", "--strategy", "replay", input="hi\n")
    assert piped.exit_code == 0, piped.stderr
    assert "waiting" not in piped.stdout
    assert "assistant> (offline mock) You said: hi." in piped.stdout


LONG = "tell me a long story about " + " ".join(f"w{i}" for i in range(300))


@pytest.mark.parametrize("stop", ["/stop\r", "\x03"], ids=["slash-stop", "ctrl-c"])
def test_a_stop_typed_while_streaming_stops_it_and_is_not_echoed(
    stop: str, terminals: list[Terminal], tmp_path: Path
) -> None:
    db = tmp_path / "chat.sqlite3"
    chat = open_terminal(terminals, "--db", str(db), "--strategy", "previous_response")
    chat.type(LONG + "\r")
    chat.expect(r"assistant> .*You said: tell me")
    chat.type(stop)
    assert chat.answer() == "cancelled"
    chat.expect("you> ")
    chat.type("/quit\r")
    assert chat.wait() == 0
    answer = chat.text.split("assistant> ", 1)[1].split("  · ", 1)[0]
    assert "/stop" not in answer and "^C" not in answer
    [stored] = chats(db)
    [record] = stored["attempts"]
    assert record["status"] == "cancelled"
    kept = {n["id"]: n for n in stored["graph"]["nodes"]}[record["message_id"]]
    content = kept["items"][0]["content"]
    partial = content if isinstance(content, str) else content[0]["text"]
    assert partial.startswith("(offline mock) You said: tell me") and "w299" not in partial


@pytest.mark.parametrize("key", ["\x03", "\x04"], ids=["ctrl-c", "ctrl-d"])
def test_ctrl_c_or_ctrl_d_at_the_prompt_leaves_on_a_new_line(
    key: str, terminals: list[Terminal]
) -> None:
    chat = open_terminal(terminals, "--strategy", "replay")
    chat.wait_reading()
    chat.type(key)
    assert chat.wait() == 0
    after = chat.raw.rsplit("you> ", 1)[1]
    assert _ESCAPES.sub("", after) in ("\r\n", "^C\r\n")
    assert "Traceback" not in chat.text and "error" not in chat.text


# -- references: one kind for every command, prefixes, ambiguity --------------------------------


def test_edit_switch_and_explain_take_id_prefixes_and_path_numbers(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    first = run("chat", "--db", str(db), "--strategy", "replay", input="hi\nagain\n")
    assert first.exit_code == 0, first.stderr
    [stored] = chats(db)
    nodes = stored["graph"]["nodes"]
    system, _hi, hi_answer, again, again_answer = (n["id"] for n in nodes)
    prefix = stored["id"][:9]  # --conversation takes a prefix, like inspect
    script = (
        f"/edit {again[:10]} once more\n"  # an id prefix
        f"/explain {again_answer[:10]} 5\n"  # a prefix and a /path number
        f"/switch {hi_answer[:10]}\n"
        "/edit 3 not a user message\n"
        "/edit 2 hello\n"  # a /path number
    )
    second = run("chat", "--db", str(db), "--conversation", prefix, input=script)
    assert second.exit_code == 0, second.stderr
    out = second.stdout
    assert f"chat {stored['id']}" in out
    assert "You said: once more" in out and "You said: hello" in out
    assert "prompt" in out or "message" in out  # the explanation of two different requests
    assert f"active leaf: {hi_answer[:12]} (assistant, complete)" in out
    assert "message 3 is an assistant message, not a user one" in out
    assert "a assistant" not in out
    graph = chats(db)[0]["graph"]["nodes"]
    edits = [n["items"][0]["content"] for n in graph if n["role"] == "user"]
    assert edits == ["hi", "again", "once more", "hello"]
    assert system not in out.split("active leaf", 1)[1]  # nothing resolved to the system message


def test_an_ambiguous_prefix_lists_its_candidates(tmp_path: Path) -> None:
    result = run("chat", "--strategy", "replay", input="hi\n/switch msg_\n/explain m att_\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    listed = re.search(r"message id 'msg_' is ambiguous: it matches (.*); type more", out)
    assert listed is not None, out
    shown = listed.group(1).split(", ")
    assert len(shown) == 3 and all(re.fullmatch(r"msg_[0-9a-f]{8}", s) for s in shown)
    path = re.findall(r"msg_[0-9a-f]{8}", out.split("/help for commands", 1)[1])
    assert set(shown) <= set(path)  # the same short ids the chat prints elsewhere
    assert "attempt id 'm' is ambiguous: it matches msg_" in out


def test_an_unknown_conversation_prefix_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    for _ in range(2):
        assert run("chat", "--db", str(db), input="hi\n").exit_code == 0
    result = run("chat", "--db", str(db), "--conversation", "chat_")
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert "is ambiguous" in line and line.count("chat_") >= 3


def test_sending_on_an_edited_away_branch_continues_it(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    script = f"{LONG}\n/stop\n/edit 2 short\n/branches\n"
    result = run("chat", "--db", str(db), "--strategy", "replay", input=script)
    assert result.exit_code == 0, result.stderr
    [stored] = chats(db)
    stopped = stored["attempts"][0]
    assert stopped["status"] == "cancelled"
    # A stopped answer whose branch was edited away shows both facts.
    assert f"{stopped['message_id'][:12]} assistant invalid (was cancelled)" in result.stdout

    again = run(
        "chat", "--db", str(db), "--conversation", stored["id"],
        input=f"/switch {stopped['message_id'][:12]}\n/path\nmore\n",
    )  # fmt: skip
    assert again.exit_code == 0, again.stderr
    out = again.stdout
    assert "(assistant, invalid (was cancelled))" in out and "note: this version was edited" in out
    assert "invalid (was cancelled)" in out.split("/path", 1)[-1]
    assert "error:" not in out
    [after] = chats(db)
    assert len(after["attempts"]) == 3  # "more" was sent, on the old version's branch
    nodes = {n["id"]: n for n in after["graph"]["nodes"]}
    more = next(
        n for n in nodes.values() if n["role"] == "user" and n["items"][0]["content"] == "more"
    )
    assert more["parent_id"] == stopped["message_id"]
    assert nodes[stopped["message_id"]]["status"] == "invalid"  # the mark stays


def test_an_empty_message_is_not_sent(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    result = run("chat", "--db", str(db), "--strategy", "replay", input="   \n\nhi\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("(empty message: nothing sent)") == 2
    [stored] = chats(db)
    users = [n["items"][0]["content"] for n in stored["graph"]["nodes"] if n["role"] == "user"]
    assert users == ["hi"] and len(stored["attempts"]) == 1


# -- the real API's path: --agent, tracing, connection errors, the SDK's log ---------------------

AGENT_MODULE = """
import json, os
from agents import Agent, set_trace_processors
from agents.tracing import TracingProcessor


class ToFile(TracingProcessor):
    def on_trace_start(self, trace):
        with open(os.environ["TRACES_TO"], "a") as out:
            out.write(json.dumps({"trace": trace.name}) + "\\n")

    def on_trace_end(self, trace): pass
    def on_span_start(self, span): pass
    def on_span_end(self, span): pass
    def shutdown(self): pass
    def force_flush(self): pass


set_trace_processors([ToFile()])  # and no exporter: nothing leaves this machine
pirate = Agent(name="pirate", instructions="Talk like a pirate.", model="gpt-4.1-mini")


def make():
    return pirate.clone(name="made")
"""


@pytest.fixture
def agent_module(tmp_path: Path) -> Path:
    (tmp_path / "my_agents.py").write_text(AGENT_MODULE, encoding="utf-8")
    return tmp_path


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    from agents_state_ext.testing import MockServer

    with MockServer() as server:
        yield server


def test_agent_loads_the_users_agent_and_tracing_stays_on_against_the_api(
    agent_module: Path, api: Any, terminals: list[Terminal]
) -> None:
    api.reset()
    traces = agent_module / "traces.jsonl"
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": api.base_url, "TRACES_TO": str(traces)}
    chat = open_terminal(
        terminals, "--agent", "my_agents:pirate", "--strategy", "replay", env=env, cwd=agent_module
    )
    assert f"OpenAI API at {api.base_url}" in chat.text
    chat.type("ahoy\r")
    assert chat.answer() == "complete"
    chat.type("/quit\r")
    assert chat.wait() == 0
    [request] = api.response_requests
    assert (request["instructions"], request["model"]) == ("Talk like a pirate.", "gpt-4.1-mini")
    assert [json.loads(line)["trace"] for line in traces.read_text().splitlines()] == [
        "Agent workflow"
    ]

    # Offline the same agent answers on the mock, and tracing is off.
    traces.unlink()
    offline = open_terminal(
        terminals, "--agent", "my_agents:make", "--offline", env=env, cwd=agent_module
    )
    offline.type("ahoy\r")
    offline.expect(r"You said: ahoy\.")
    offline.type("/quit\r")
    assert offline.wait() == 0 and not traces.exists()
    assert len(api.response_requests) == 1


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("my_agents", "expected MODULE:ATTR"),
        ("no_such_module:agent", "cannot import 'no_such_module'"),
        ("my_agents:nobody", "has no attribute 'nobody'"),
        ("my_agents:ToFile", "is a ToFile, not an agents.Agent"),
    ],
)
def test_a_bad_agent_is_one_line(
    spec: str, needle: str, agent_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(agent_module)
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = run("chat", "--agent", spec, env={"TRACES_TO": str(agent_module / "t")})
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and needle in line


def test_a_connection_error_names_the_url() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": url}
    result = run("chat", "--strategy", "replay", input="hi\n", env=env)
    assert result.exit_code == 0, result.stderr
    assert f"error: connection to {url}/responses failed (Connection error.)" in result.stdout


def test_the_sdks_log_lines_never_land_in_the_answer(api: Any, terminals: list[Terminal]) -> None:
    from _grammar import message, stream, through

    from agents_state_ext.testing import Fault, Reply

    api.reset()
    api.enqueue(Reply.text("one two three four"))
    api.inject(Fault.drop_mid_stream(through(stream(message(2)), "response.output_text.delta")))
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": api.base_url}
    chat = open_terminal(terminals, "--strategy", "replay", env=env)
    chat.type("hi\r")
    assert chat.answer() == "failed"
    chat.expect("you> ")
    chat.type("/quit\r")
    assert chat.wait() == 0
    lines = [shown(line) for line in chat.raw.splitlines()]
    [answer] = [ln for ln in lines if "assistant> " in ln]
    assert answer.startswith("assistant> ") and "Error" not in answer and "log" not in answer
    logged = [ln for ln in lines if "Error streaming response" in ln]
    assert logged and all(ln.startswith("  log: Error streaming response") for ln in logged)
    assert f"connection to {api.base_url}/responses failed" in chat.text


# -- numbering, replays and the attempt table (issue 27, item 9) --------------------------------


def test_switch_n_is_the_branch_numbered_n_on_branches(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    first = run("chat", "--db", str(db), "--strategy", "replay", input="hi\n/edit 2 yo\n")
    assert first.exit_code == 0, first.stderr
    [stored] = chats(db)
    script = "/branches\n/switch 1\n/branches\n/switch 2\n"
    second = run("chat", "--db", str(db), "--conversation", stored["id"], input=script)
    assert second.exit_code == 0, second.stderr
    listed = re.findall(r"(?:^|you> ) ([ *])(\d)\. (msg_[0-9a-f]+) ", second.stdout, re.M)
    assert [(star, n) for star, n, _ in listed] == [(" ", "1"), ("*", "2"), ("*", "1"), (" ", "2")]
    leaves = {n: leaf for _, n, leaf in listed}
    switched = re.findall(r"active leaf: (msg_[0-9a-f]+) ", second.stdout)
    assert switched == [leaves["1"], leaves["2"]]  # never the system message, /path's 1


def test_replay_in_chat_stays_on_the_branch_unless_asked_to_switch(tmp_path: Path) -> None:
    db = tmp_path / "chat.sqlite3"
    first = run("chat", "--db", str(db), "--strategy", "replay", input="hi\n")
    assert first.exit_code == 0, first.stderr
    [stored] = chats(db)
    answer = stored["graph"]["nodes"][-1]["id"]
    script = "/replay 3\n/path\n/replay 3 switch\n/path\n"
    second = run("chat", "--db", str(db), "--conversation", stored["id"], input=script)
    assert second.exit_code == 0, second.stderr
    out = second.stdout
    kept, moved = re.findall(r"\[3\] (msg_[0-9a-f]+) assistant", out)
    assert kept == answer[:12]  # the first replay left the active branch where it was
    replays = [r["message_id"] for r in chats(db)[0]["attempts"] if r["replay_of"]]
    assert len(replays) == 2 and moved == replays[1][:12]
    assert "the active branch stays on" in out and "now on the replay" in out


def test_the_attempt_table_shows_whole_ids_when_piped_at_any_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "chat.sqlite3"
    assert run("chat", "--db", str(db), input="hi\n").exit_code == 0
    [stored] = chats(db)
    [record] = stored["attempts"]
    for columns in ("120", "80", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        for result in (
            run("inspect", str(db)),
            run("chat", "--db", str(db), "--conversation", stored["id"], input="/attempts\n"),
        ):
            assert result.exit_code == 0, result.stderr
            assert record["attempt_id"] in result.stdout, (columns, result.stdout)
            assert record["message_id"] in result.stdout, (columns, result.stdout)
            lines = [line.replace("you> ", "") for line in result.stdout.splitlines()]
            widest = max(len(line) for line in lines if "│" in line)  # the table's rows
            if columns != "300":
                assert widest <= int(columns), (columns, result.stdout)
