"""The browser page in a real (headless) Chromium, against the app ``serve`` runs.

Each step is checked twice: on what the page shows, and on what the server stored (the tree
and the attempt records over the API). The app runs on uvicorn in a thread on a free loopback
port with a SQLite file; the model is the mock server in its own process (one a module), so a
test can queue a long, slow answer to stop, or a model failure. The multi-worker test runs
``agents-state-ext serve --workers 2`` on PostgreSQL and Redis.

Playwright never downloads a browser here: it drives the Chromium of ``STATE_EXT_CHROMIUM`` or
the ``chromium`` on ``PATH``, and the tests skip, saying so, without one. With
``STATE_EXT_UI_SCREENSHOTS=DIR`` the tests save screenshots there (docs/img holds the ones
docs/ui.md shows).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import httpx
import pytest
import uvicorn
from _backends import POSTGRES_ENV, REDIS_ENV, postgres_url, redis_url, unique_name
from _outage import free_port
from _served import interrupt

from agents_state_ext.server import ServeSettings, app_from_settings
from agents_state_ext.testing import Fault, MockServer, Reply

sync_api = pytest.importorskip("playwright.sync_api")
Browser, Page, expect = sync_api.Browser, sync_api.Page, sync_api.expect

# The app in this process talks to the mock over a real socket, and the model client it runs
# leaves connections to be garbage-collected unclosed (after a stop or a failed stream): not
# the page's doing. While it serves, the collector may meet them in any of these tests;
# ThreadServer collects the rest when it stops, so none reaches another module's test.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)

CHROMIUM_ENV = "STATE_EXT_CHROMIUM"
SHOTS_ENV = "STATE_EXT_UI_SCREENSHOTS"
ROOT = Path(__file__).resolve().parents[1]
WAIT = 20_000  # ms: a guard against a hang only, never a measured duration

LONG = "Once upon a time " + " ".join(f"wave{i}" for i in range(400))
FIRST = (
    "Tell me a long story about the sea, the ships that cross it, the harbours they leave "
    "at dawn, the storms they meet on the way and the people who wait for them on the shore"
)
SECOND = "Second question?"
THIRD = "Third question?"
EDITED = "Second question, edited?"
BUDGET = 60  # the first turn (long) never fits again; a short turn and a short question do


def chromium() -> str:
    """The Chromium to drive, or a visible skip."""
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium")
    path = path or shutil.which("chromium-browser")
    if not path:
        pytest.skip(f"the browser tests need Chromium: install it or set {CHROMIUM_ENV}")
    return path


def slow(text: str = LONG, delay: float = 0.05) -> Reply:
    """An answer streamed a word at a time, long enough to be stopped mid-way."""
    words = text.split(" ")
    return Reply.text(text, chunks=[w + " " for w in words[:-1]] + [words[-1]], delay=delay)


class ThreadServer:
    """An ASGI app on uvicorn in a background thread, on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:  # waiting for startup, not asserting on time
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()
        # The app's model client leaves connections to the mock unclosed (after a stop or a
        # failed stream): collect them now, quietly, rather than in whatever test runs next.
        del self.server, self.thread
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def drop_test_databases() -> None:
    """Replaces tests/conftest.py's: nothing here comes from tests/_backends.py's factories
    (the one schema made here is dropped here), and its ``asyncio.run`` cannot run while
    Playwright's sync API keeps its own event loop running in this thread."""


@pytest.fixture(scope="module", autouse=True)
def patient_expectations() -> None:
    expect.set_options(timeout=WAIT)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def mock() -> Iterator[MockServer]:
    with MockServer(echo_delay=0.02) as server:
        yield server


@pytest.fixture(scope="module")
def served(mock: MockServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of the page: the app of ``serve`` on a SQLite file, answered by the mock."""
    store = tmp_path_factory.mktemp("ui") / "ui.db"
    settings = ServeSettings(store=str(store), mock_url=mock.base_url)
    with ThreadServer(app_from_settings(settings)) as server:
        yield server.url


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(WAIT)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert not errors, f"the page raised: {errors}"


Shot = Callable[..., None]


@pytest.fixture
def shot() -> Shot:
    """``shot(page, name)`` saves ``ui-<name>.png`` in the screenshot folder, if one is set
    (the whole page; ``full_page=False``: what the screen shows)."""
    folder = os.environ.get(SHOTS_ENV)

    def save(page: Page, name: str, *, full_page: bool = True) -> None:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            path = Path(folder) / f"ui-{name}.png"
            page.screenshot(path=str(path), full_page=full_page)

    return save


# -- helpers -------------------------------------------------------------------------------------


class API:
    """The server's own answers, to check the page against."""

    def __init__(self, base: str, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base + "api/", timeout=30, headers=headers)

    def get(self, path: str) -> Any:
        response = self.http.get(path)
        assert response.status_code == 200, response.text
        return response.json()

    def nodes(self, cid: str) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = self.get(f"conversations/{cid}/tree")["nodes"]
        return nodes

    def records(self, cid: str) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.get(f"conversations/{cid}/attempts")["attempts"]
        return records

    def active_leaf(self, cid: str) -> str:
        leaf: str = self.get(f"conversations/{cid}")["active_leaf"]
        return leaf


def create(page: Page, *, strategy: str = "", budget: int | None = None) -> str:
    """Create a conversation with the page's form; its id (the page puts it in the URL)."""
    before = page.url
    if strategy:
        page.select_option("#new-strategy", strategy)
    page.fill("#new-budget", str(budget) if budget else "")
    page.click("#new-create")
    expect(page).not_to_have_url(before)
    expect(page).to_have_url(re.compile(r"#c=chat_"))
    expect(page.locator("#chat-title")).to_contain_text(strategy or "budget")
    return unquote(page.url.split("#c=", 1)[1])


def send(page: Page, text: str) -> None:
    """Type a message and press Enter (the keyboard path)."""
    box = page.locator("#composer-input")
    expect(box).to_be_enabled()
    box.fill(text)
    box.press("Enter")


def settled(page: Page) -> None:
    """Wait until no answer streams (the stop button goes away)."""
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#messages li.live")).to_have_count(0)


def answers(page: Page) -> Any:
    return page.locator("#messages li.assistant")


def ids(locator: Any) -> list[str]:
    found: list[str] = locator.evaluate_all("items => items.map(item => item.dataset.id)")
    return found


# -- the whole flow ------------------------------------------------------------------------------


def test_send_stop_retry_edit_context_and_explain(
    page: Page, served: str, mock: MockServer, shot: Shot
) -> None:
    api = API(served)
    page.goto(served)
    cid = create(page, strategy="replay", budget=BUDGET)

    # send: the answer streams in, then stop keeps the partial answer, marked stopped
    mock.enqueue(slow())
    send(page, FIRST)
    first = answers(page).last
    expect(page.locator("#messages li.user .msg-text")).to_have_text([FIRST])
    expect(first.locator(".msg-text")).to_contain_text("Once upon a time wave0")
    expect(first).to_have_class(re.compile(r"\blive\b"))
    page.click("#stop")
    settled(page)
    expect(first.locator(".badge")).to_have_text("stopped")
    expect(first.locator(".reason")).to_contain_text("partial answer is kept")
    stopped = [n for n in api.nodes(cid) if n["role"] == "assistant"]
    assert [n["status"] for n in stopped] == ["cancelled"]
    partial = stopped[0]["text"]
    assert partial.startswith("Once upon a time") and len(partial) < len(LONG)
    expect(first.locator(".msg-text")).to_have_text(partial)

    # retry: "2/2", the new answer; navigating shows the stopped one again, and back
    first.locator("button.retry").click()
    expect(answers(page).locator(".pos")).to_have_text("2/2")
    settled(page)
    expect(answers(page).locator(".msg-text")).to_have_text(f"echo: {FIRST}")
    shot(page, "retry")
    page.get_by_role("button", name="Previous answer").click()
    expect(answers(page).locator(".pos")).to_have_text("1/2")
    expect(answers(page).locator(".msg-text")).to_have_text(partial)
    expect(answers(page).locator(".badge")).to_have_text("stopped")
    assert api.active_leaf(cid) == stopped[0]["id"]
    page.get_by_role("button", name="Next answer").click()
    expect(answers(page).locator(".pos")).to_have_text("2/2")
    expect(answers(page).locator(".msg-text")).to_have_text(f"echo: {FIRST}")
    siblings = [n for n in api.nodes(cid) if n["role"] == "assistant"]
    assert [(n["status"], n["siblings"]) for n in siblings] == [("cancelled", 2), ("complete", 2)]

    # two more turns; the context panel of the last answer: sent, and skipped for the budget
    send(page, SECOND)
    settled(page)
    send(page, THIRD)
    settled(page)
    expect(answers(page)).to_have_count(3)
    record = api.records(cid)[-1]
    nodes = {n["id"]: n for n in api.nodes(cid)}
    path = []
    node_id = nodes[record["message_id"]]["parent_id"]
    while node_id:
        path.insert(0, node_id)
        node_id = nodes[node_id]["parent_id"]
    skipped = [i for i in path if i not in record["included"]]
    assert [nodes[i]["text"] for i in skipped] == [FIRST, f"echo: {FIRST}"]  # the long turn
    assert [nodes[i]["text"] for i in record["included"]] == [SECOND, f"echo: {SECOND}", THIRD]
    panel = page.locator("#context-body")
    expect(panel.locator(".sent li")).to_have_count(3)
    assert ids(panel.locator(".sent li")) == list(record["included"])
    assert ids(panel.locator(".skipped.budget li")) == skipped
    expect(panel.locator(".skipped.budget")).to_contain_text(FIRST[:30])
    expect(panel.locator(".tokens")).to_contain_text(f"{record['used']} of {BUDGET}")
    expect(panel.locator(".overflow")).to_have_text("no")
    expect(page.locator("#record-body [data-field='attempt']")).to_have_text(record["attempt_id"])
    expect(page.locator("#record-body [data-field='imported from']")).to_have_text("—")
    expect(page.locator("#record-body [data-field='used']")).to_have_text(str(record["used"]))

    # edit the second question in place: the old branch turns invalid, greyed, still reachable
    second = page.locator("#messages li.user").nth(1)
    second.locator("button.edit").click()
    editor = second.locator("textarea")
    expect(editor).to_be_focused()
    expect(editor).to_have_value(SECOND)
    editor.fill(EDITED)
    editor.press("Enter")
    expect(page.locator("#messages li.user").nth(1).locator(".pos")).to_have_text("2/2")
    settled(page)
    expect(page.locator("#messages li.user .msg-text")).to_have_text([FIRST, EDITED])
    expect(answers(page).last.locator(".msg-text")).to_have_text(f"echo: {EDITED}")
    nodes = {n["id"]: n for n in api.nodes(cid)}
    old_user = next(n for n in nodes.values() if n["text"] == SECOND)
    new_user = next(n for n in nodes.values() if n["text"] == EDITED)
    invalid = [n for n in nodes.values() if n["status"] == "invalid"]
    assert [n["text"] for n in invalid] == [f"echo: {SECOND}", THIRD, f"echo: {THIRD}"]
    assert {n["meta"]["invalidated_by"] for n in invalid} == {new_user["id"]}

    page.locator("#messages li.user").nth(1).get_by_role("button", name="Previous version").click()
    expect(page.locator("#messages li.user").nth(1).locator(".pos")).to_have_text("1/2")
    greyed = page.locator("#messages li.invalid")
    expect(greyed).to_have_count(3)
    assert ids(greyed) == [n["id"] for n in invalid]
    expect(greyed.first).to_have_css("filter", "grayscale(1)")
    expect(greyed.first.locator(".reason")).to_contain_text(f"edited (now “{EDITED}”)")
    expect(page.locator("#branch-note")).to_contain_text("replaced by an edit")
    expect(page.locator("#branch-note")).to_contain_text("Sending continues it")
    expect(page.locator("#composer-input")).to_be_enabled()  # that version can go on
    assert api.active_leaf(cid) == invalid[-1]["id"]
    page.locator("#graph summary").first.click()
    expect(page.locator("#graph-body .node.active-leaf")).to_have_attribute(
        "data-id", invalid[-1]["id"]
    )
    expect(page.locator("#graph-body .node.status-invalid")).to_have_count(3)
    shot(page, "invalid-branch")

    # explain the old answer to the second question against the new one
    page.get_by_role("button", name="Next version").click()
    expect(page.locator("#messages li.user .msg-text")).to_have_text([FIRST, EDITED])
    by_message = {r["message_id"]: r for r in api.records(cid)}
    old_answer = by_message[next(n["id"] for n in invalid if n["role"] == "assistant")]
    new_answer = api.records(cid)[-1]
    page.select_option("#explain-a", old_answer["attempt_id"])
    page.select_option("#explain-b", new_answer["attempt_id"])
    page.click("#explain-run")
    diff = api.get(
        f"conversations/{cid}/explain?a={old_answer['attempt_id']}&b={new_answer['attempt_id']}"
    )
    assert diff["differs"] and list(diff["removed"]) == [old_user["id"]]
    assert list(diff["added"]) == [new_user["id"]]
    body = page.locator("#explain-body")
    expect(body.locator(".diff-summary")).to_contain_text("differences in what was sent")
    expect(body.locator(".diff-removed li")).to_have_count(1)
    assert ids(body.locator(".diff-removed li")) == [old_user["id"]]
    assert ids(body.locator(".diff-added li")) == [new_user["id"]]
    expect(body.locator(".diff-removed")).to_contain_text(SECOND)
    expect(body.locator(".diff-added")).to_contain_text(EDITED)
    expect(body.locator(".diff-fields")).to_contain_text("parent user id")
    shot(page, "explain")


def test_an_edited_away_version_is_continued_from_the_page(
    page: Page, served: str, mock: MockServer
) -> None:
    api = API(served)
    page.goto(served)
    cid = create(page, strategy="replay")
    for question in ("one?", "two?"):
        send(page, question)
        settled(page)
    first = page.locator("#messages li.user").nth(0)
    first.locator("button.edit").click()
    editor = first.locator("textarea")
    editor.fill("uno?")
    editor.press("Enter")
    settled(page)
    expect(page.locator("#messages li.user .msg-text")).to_have_text(["uno?"])
    page.locator("#messages li.user").nth(0).get_by_role("button", name="Previous version").click()
    expect(page.locator("#messages li.user .msg-text")).to_have_text(["one?", "two?"])
    expect(page.locator("#branch-note")).to_contain_text("Sending continues it")
    send(page, "three?")
    settled(page)
    expect(page.locator("#messages li.user .msg-text")).to_have_text(["one?", "two?", "three?"])
    expect(answers(page).last.locator(".msg-text")).to_have_text("echo: three?")
    record = api.records(cid)[-1]
    nodes = {n["id"]: n for n in api.nodes(cid)}
    sent = [nodes[i]["text"] for i in record["included"] if nodes[i]["role"] != "system"]
    assert sent == ["one?", "echo: one?", "two?", "echo: two?", "three?"]
    old = [n for n in nodes.values() if n["text"] in ("echo: one?", "two?", "echo: two?")]
    assert {n["status"] for n in old} == {"invalid"}  # the edit's marks stay, as history
    assert nodes[record["message_id"]]["status"] == "complete"


# -- errors are messages -------------------------------------------------------------------------


def test_overflow_conflict_and_model_failure_are_shown_as_messages(
    page: Page, served: str, mock: MockServer, shot: Shot
) -> None:
    api = API(served)
    page.goto(served)

    # over the budget: 422 with the counts, nothing stored, the text back in the box; the
    # alert's button raises the budget to what the message needs, and sending again answers
    tiny = create(page, strategy="replay", budget=5)
    hello = "Hello there, how are you today, my friend?"
    send(page, hello)
    alert = page.locator("#alerts .alert").last
    expect(alert).to_contain_text("422 ContextOverflowError")
    expect(alert).to_contain_text("budget 5")
    settled(page)
    expect(page.locator("#composer-input")).to_have_value(hello)
    expect(answers(page)).to_have_count(0)
    assert api.records(tiny) == []
    assert api.nodes(tiny) == []
    shot(page, "overflow")
    alert.get_by_role("button", name=re.compile("raise the budget")).click()
    expect(page.locator("#alerts .alert")).to_have_count(0)
    expect(page.locator("#chat-title")).not_to_contain_text("budget 5 tokens")
    page.locator("#composer-input").press("Enter")
    settled(page)
    expect(answers(page)).to_have_count(1)
    expect(answers(page).locator(".badge")).to_have_count(0)  # complete: no status badge
    assert [r["status"] for r in api.records(tiny)] == ["complete"]
    assert [n["text"] for n in api.nodes(tiny) if n["role"] == "user"] == [hello]

    # another client drives the conversation: the page's send is refused with 409
    busy = create(page)
    started = threading.Event()
    events: list[str] = []

    def other_client() -> None:
        with (
            httpx.Client(base_url=served, timeout=60) as client,
            client.stream(
                "POST", f"api/conversations/{busy}/messages", json={"content": "me first"}
            ) as stream,
        ):
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    events.append(line[7:])
                if line == "event: delta":
                    started.set()

    mock.enqueue(slow())
    driver = threading.Thread(target=other_client)
    driver.start()
    try:
        assert started.wait(30)
        send(page, "me too")
        expect(page.locator("#alerts .alert").last).to_contain_text("409 ConversationBusyError")
        expect(page.locator("#composer-input")).to_have_value("me too")  # not lost
        assert [n["text"] for n in api.nodes(busy) if n["role"] == "user"] == ["me first"]
    finally:
        stop = httpx.post(f"{served}api/conversations/{busy}/stop", timeout=30)
        driver.join(30)
    assert stop.status_code == 200 and stop.json()["status"] == "cancelled"
    assert events[-1] == "record"
    page.click("#refresh")
    expect(answers(page).locator(".badge")).to_have_text("stopped")
    expect(page.locator("#messages li.user .msg-text")).to_have_text(["me first"])

    # the model fails: the stream ends with an error, the attempt is stored as failed
    mock.inject(Fault.status(500, "the model is down"))
    send(page, "and now?")
    expect(page.locator("#alerts .alert").last).to_contain_text("502")
    settled(page)
    expect(answers(page).last.locator(".badge")).to_have_text("failed")
    expect(answers(page).last.locator(".reason")).to_contain_text("the model is down")
    assert api.records(busy)[-1]["status"] == "failed"
    shot(page, "errors")


# -- keyboard and a narrow screen ----------------------------------------------------------------


def test_keyboard_only_at_a_phone_width(browser: Browser, served: str, shot: Shot) -> None:
    api = API(served)
    context = browser.new_context(viewport={"width": 380, "height": 800})
    context.set_default_timeout(WAIT)
    page = context.new_page()
    try:
        page.goto(served)
        # narrow: one column, the conversation list folded, nothing wider than the screen
        expect(page.locator("#sidebar")).not_to_have_attribute("open", "")
        page.locator("#sidebar summary").press("Enter")
        expect(page.locator("#sidebar")).to_have_attribute("open", "")
        page.locator("#new-budget").focus()
        page.keyboard.type("500")
        page.keyboard.press("Tab")  # the system prompt
        page.keyboard.press("Tab")  # the create button
        expect(page.locator("#new-create")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#composer-input")).to_be_focused()
        cid = unquote(page.url.split("#c=", 1)[1])

        page.keyboard.type("Hello from the keyboard")
        page.keyboard.press("Enter")
        settled(page)
        expect(answers(page).locator(".msg-text")).to_have_text("echo: Hello from the keyboard")
        expect(page.locator("#composer-input")).to_be_focused()

        # Shift+Tab walks back from the message box to the answer's buttons
        page.keyboard.press("Shift+Tab")
        details = answers(page).locator("button.details")
        expect(details).to_be_focused()
        page.keyboard.press("Shift+Tab")
        retry = answers(page).locator("button.retry")
        expect(retry).to_be_focused()
        expect(retry).to_have_css("outline-style", "solid")  # the focus is visible
        page.keyboard.press("Enter")
        expect(answers(page).locator(".pos")).to_have_text("2/2")
        settled(page)
        expect(answers(page).locator("button.retry")).to_be_focused()  # its place is kept
        page.keyboard.press("Shift+Tab")  # "next" is disabled at 2/2: the tab skips it
        expect(page.get_by_role("button", name="Previous answer")).to_be_focused()
        page.keyboard.press("Enter")
        expect(answers(page).locator(".pos")).to_have_text("1/2")
        expect(page.get_by_role("button", name="Next answer")).to_be_focused()
        assert api.active_leaf(cid) == api.records(cid)[0]["message_id"]

        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 380, f"the page is {width}px wide at a 380px screen"
        page.locator("#chat").scroll_into_view_if_needed()
        shot(page, "narrow", full_page=False)  # the message box stays at the screen's bottom
    finally:
        context.close()


# -- with tokens ---------------------------------------------------------------------------------


def test_with_tokens_the_page_asks_for_one(
    browser: Browser, mock: MockServer, tmp_path: Path
) -> None:
    settings = ServeSettings(
        store=str(tmp_path / "tokens.db"),
        mock_url=mock.base_url,
        tokens={"alice": "alice-secret-0001"},
    )
    with ThreadServer(app_from_settings(settings)) as server:
        context = browser.new_context()
        context.set_default_timeout(WAIT)
        page = context.new_page()
        try:
            page.goto(server.url)
            expect(page.locator("#alerts .alert").first).to_contain_text("401 Unauthorized")
            expect(page.locator("#access")).to_be_visible()
            expect(page.locator("#access-token")).to_be_focused()
            page.keyboard.type("alice-secret-0001")
            page.keyboard.press("Enter")
            expect(page.locator("#access")).to_be_hidden()
            cid = create(page)
            send(page, "hello alice")
            settled(page)
            expect(answers(page).locator(".msg-text")).to_have_text("echo: hello alice")
            assert (
                page.evaluate("sessionStorage.getItem('agents-state-ext.token')")
                == "alice-secret-0001"
            )
        finally:
            context.close()
        mine = API(server.url, token="alice-secret-0001").get("conversations")["conversations"]
        assert [c["id"] for c in mine] == [cid]


# -- several workers -----------------------------------------------------------------------------


def schema_url(url: str, schema: str) -> str:
    """``url`` with its connections' ``search_path`` set to ``schema``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


class Workers:
    """``agents-state-ext serve --workers 2`` on a fresh PostgreSQL schema, as a process.

    :meth:`start` launches it without waiting (it takes a while: two workers import the
    package), :meth:`url` waits until it answers; :meth:`close` stops it and drops the schema.
    """

    TEST = "test_send_stop_retry_against_two_workers_on_postgres_and_redis"

    def __init__(self, mock_url: str, folder: Path) -> None:
        self.mock_url, self.folder = mock_url, folder
        self.process: subprocess.Popen[bytes] | None = None
        self.base = self.schema = ""
        self.port = 0

    def start(self) -> None:
        if self.process is not None:
            return
        import psycopg

        database, redis = postgres_url(), redis_url()
        self.base, self.schema = database, unique_name("ui")
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.schema}"'.encode())
        self.port = free_port()
        env = {
            **os.environ,
            "OPENAI_API_KEY": "",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "AGENTS_STATE_EXT_NAMESPACE": unique_name("ui"),
        }
        command = [sys.executable, "-m", "agents_state_ext", "serve", "--port", str(self.port)]
        command += ["--workers", "2", "--store", schema_url(database, self.schema)]
        command += ["--redis", redis, "--mock-url", self.mock_url, "--log-level", "warning"]
        with open(self.folder / "serve.log", "wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.folder
            )

    def url(self) -> str:
        self.start()
        assert self.process is not None
        url = f"http://127.0.0.1:{self.port}/"
        deadline = time.monotonic() + 90
        with httpx.Client(base_url=url, timeout=5) as probe:
            while True:  # waiting for startup, not asserting on time
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.folder / "serve.log").read_text()[-3000:]
                    raise RuntimeError(f"serve did not start:\n{log}")
                with contextlib.suppress(httpx.TransportError):
                    if probe.get("api/health").status_code == 200:
                        return url
                time.sleep(0.1)

    def close(self) -> None:
        if self.process is None:
            return
        interrupt(self.process)
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'.encode())


@pytest.fixture(scope="module")
def workers(mock: MockServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    started = Workers(mock.base_url, tmp_path_factory.mktemp("workers"))
    yield started
    started.close()


@pytest.fixture(scope="module", autouse=True)
def start_workers_early(request: pytest.FixtureRequest) -> None:
    """Launch the workers at the module's start when their test will run in this process, so
    they start while the other tests run. Under pytest-xdist that is so when the module's tests
    form one group (tests/conftest.py marks them, pyproject runs ``--dist=loadgroup``);
    otherwise the test starts them itself."""
    found = [item for item in request.session.items if item.name == Workers.TEST]
    services = os.environ.get(POSTGRES_ENV) and os.environ.get(REDIS_ENV)
    xdist = hasattr(request.config, "workerinput")
    if found and services and (not xdist or found[0].get_closest_marker("xdist_group")):
        request.getfixturevalue("workers").start()


def test_send_stop_retry_against_two_workers_on_postgres_and_redis(
    page: Page, mock: MockServer, workers: Workers
) -> None:
    postgres_url(), redis_url()  # each skips, naming its variable, when unset
    url = workers.url()
    api = API(url)
    page.goto(url)
    cid = create(page, strategy="previous_response")
    mock.enqueue(slow())
    send(page, "tell me a story")
    expect(answers(page).locator(".msg-text")).to_contain_text("Once upon a time wave0")
    page.click("#stop")
    settled(page)
    expect(answers(page).locator(".badge")).to_have_text("stopped")
    [stopped] = api.nodes(cid)[1:]
    assert stopped["status"] == "cancelled" and len(stopped["text"]) < len(LONG)
    expect(answers(page).locator(".msg-text")).to_have_text(stopped["text"])

    answers(page).locator("button.retry").click()
    expect(answers(page).locator(".pos")).to_have_text("2/2")
    settled(page)
    expect(answers(page).locator(".msg-text")).to_have_text("echo: tell me a story")
    page.get_by_role("button", name="Previous answer").click()
    expect(answers(page).locator(".pos")).to_have_text("1/2")
    expect(answers(page).locator(".msg-text")).to_have_text(stopped["text"])
    page.get_by_role("button", name="Next answer").click()
    expect(answers(page).locator(".pos")).to_have_text("2/2")

    records = api.records(cid)
    assert [r["status"] for r in records] == ["cancelled", "complete"]
    cursor = records[-1]["cursor_after"]
    assert cursor and cursor == records[-1]["response_id"]
    expect(page.locator("#context-body .cursor-after")).to_have_text(cursor)
