"""Hostile pages in a real Chromium against a running ``agents-state-ext serve`` (issue 28).

Chromium resolves ``evil.test``, ``attacker.test`` and ``chat.test`` to 127.0.0.1
(``--host-resolver-rules``), which is what a DNS rebinding attack arranges. ``serve`` runs as
its own process with ``--allowed-host chat.test``: the page at ``evil.test`` is answered 421;
the page at ``attacker.test`` (a second local server, another origin) cannot create, send or
stop anything with the requests a page may send to another origin (``no-cors`` fetches, a
``text/plain`` form, a JSON fetch the browser must ask first); the page itself works at
``chat.test``, the name it is allowed to be reached by: create, send, stop and retry.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _served import ServedProcess
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from agents_state_ext.testing import MockServer

sync_api = pytest.importorskip("playwright.sync_api")
from test_web_ui import (  # noqa: E402
    ThreadServer,
    answers,
    chromium,
    create,
    send,
    settled,
    slow,
)

expect = sync_api.expect

RULES = "MAP evil.test 127.0.0.1, MAP attacker.test 127.0.0.1, MAP chat.test 127.0.0.1"
WAIT = 20_000  # ms: a guard against a hang only, never a measured duration


@pytest.fixture(autouse=True)
def drop_test_databases() -> None:
    """Replaces tests/conftest.py's (nothing here uses a database; Playwright's sync API
    keeps an event loop running in this thread)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=path, args=[f"--host-resolver-rules={RULES}"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(WAIT)
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture(scope="module")
def model() -> Iterator[MockServer]:
    with MockServer(echo_delay=0.02) as server:
        yield server


@pytest.fixture(scope="module")
def served(model: MockServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedProcess]:
    """``serve`` on a SQLite file, answered by the mock, reachable as ``chat.test`` too."""
    folder = tmp_path_factory.mktemp("web-security")
    args = ["serve", "--allowed-host", "chat.test", "--store", str(folder / "web.db")]
    args += ["--mock-url", model.base_url, "--log-level", "warning"]
    with ServedProcess(args, folder) as server:
        yield server


def api(served: ServedProcess, path: str) -> Any:
    """The server's own answer to ``GET /api/<path>`` (from loopback, no origin)."""
    answer = httpx.get(f"{served.url}/api/{path}", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def ids(served: ServedProcess) -> list[str]:
    return [c["id"] for c in api(served, "conversations")["conversations"]]


def attacker_site() -> Starlette:
    async def index(request: Any) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>cats</title><iframe name=sink></iframe>")

    return Starlette(routes=[Route("/", index)])


def test_a_rebound_name_gets_421_for_the_page_and_every_request(
    page: Any, served: ServedProcess
) -> None:
    before = ids(served)
    response = page.goto(f"http://evil.test:{served.port}/")
    assert response is not None and response.status == 421
    assert response.json()["error"]["type"] == "MisdirectedRequest"
    statuses = page.evaluate(
        """async () => {
          const json = {'Content-Type': 'application/json'};
          const list = await fetch('/api/conversations');
          const made = await fetch('/api/conversations', {method: 'POST', headers: json,
            body: '{}'});
          const health = await fetch('/api/health');
          return [list.status, made.status, health.status];
        }"""
    )
    assert statuses == [421, 421, 421]
    assert ids(served) == before


def test_another_site_cannot_create_send_or_stop(
    page: Any, served: ServedProcess, model: MockServer
) -> None:
    cid = httpx.post(f"{served.url}/api/conversations", json={}, timeout=30).json()["id"]
    before, requests = ids(served), len(model.requests)
    with ThreadServer(attacker_site()) as attacker:
        page.goto(attacker.url.replace("127.0.0.1", "attacker.test"))
        for target in (f"http://127.0.0.1:{served.port}", f"http://chat.test:{served.port}"):
            refused = page.evaluate(
                """async ([base, cid]) => {
                  const target = `${base}/api/conversations`;
                  const plain = (url, body) => fetch(url, {method: 'POST', mode: 'no-cors',
                    headers: {'Content-Type': 'text/plain'}, body});
                  await plain(target, '{"system": "pwned"}');
                  await fetch(target, {method: 'POST', mode: 'no-cors'});  // no body at all
                  await plain(`${target}/${cid}/messages`, '{"content": "spend the key"}');
                  // no-cors drops a JSON Content-Type: the body goes as text/plain
                  await fetch(`${target}/${cid}/messages`, {method: 'POST', mode: 'no-cors',
                    headers: {'Content-Type': 'application/json'}, body: '{"content": "x"}'});
                  await fetch(target, {method: 'POST', mode: 'no-cors',
                    body: new Blob(['{"system": "pwned"}'])});
                  await fetch(`${target}/${cid}/stop`, {method: 'POST', mode: 'no-cors'});
                  // a JSON request or a DELETE: the browser asks first, and is not let
                  const asked = [fetch(target, {method: 'POST', body: '{}',
                      headers: {'Content-Type': 'application/json'}}),
                    fetch(`${target}/${cid}`, {method: 'DELETE'})];
                  const cors = (await Promise.allSettled(asked)).map(r => r.status);
                  const form = document.createElement('form');
                  form.method = 'POST';
                  form.enctype = 'text/plain';
                  form.target = 'sink';
                  form.action = `${target}/${cid}/messages`;
                  const field = document.createElement('input');
                  field.name = '{"content": "from a form", "x": "';
                  field.value = '"}';
                  form.appendChild(field);
                  document.body.appendChild(form);
                  const loaded = new Promise(r => document.querySelector('iframe').onload = r);
                  form.submit();
                  await loaded;
                  return cors;
                }""",
                [target, cid],
            )
            assert refused == ["rejected", "rejected"]
    assert ids(served) == before
    assert api(served, f"conversations/{cid}")["active_path"] == []
    assert len(model.requests) == requests  # no answer was paid for


def test_another_site_cannot_stop_an_answer_that_streams(
    page: Any, served: ServedProcess, model: MockServer
) -> None:
    cid = httpx.post(f"{served.url}/api/conversations", json={}, timeout=30).json()["id"]
    model.enqueue(slow())
    events: queue.Queue[str | None] = queue.Queue()

    def listen() -> None:
        path = f"{served.url}/api/conversations/{cid}/messages"
        with httpx.stream("POST", path, json={"content": "a story"}, timeout=60) as answer:
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    events.put(line.removeprefix("event: "))
        events.put(None)

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    while events.get(timeout=60) != "delta":  # the answer streams
        pass
    with ThreadServer(attacker_site()) as attacker:
        page.goto(attacker.url.replace("127.0.0.1", "attacker.test"))
        page.evaluate(
            """async ([ports, cid]) => {
              for (const base of ports) {
                await fetch(`${base}/api/conversations/${cid}/stop`,
                  {method: 'POST', mode: 'no-cors'});
              }
            }""",
            [[f"http://127.0.0.1:{served.port}", f"http://chat.test:{served.port}"], cid],
        )
    # the stops were answered; had one been obeyed, the stream would end here
    after = [events.get(timeout=60) for _ in range(10)]
    assert after == ["delta"] * 10
    stopped = httpx.post(f"{served.url}/api/conversations/{cid}/stop", timeout=60)
    assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled"
    listener.join(60)


def test_the_page_works_through_its_allowed_host(
    page: Any, served: ServedProcess, model: MockServer
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    response = page.goto(f"http://chat.test:{served.port}/")
    assert response is not None and response.status == 200
    assert response.headers["x-content-type-options"] == "nosniff"
    cid = create(page)
    model.enqueue(slow())
    send(page, "tell me a story")
    expect(answers(page).locator(".msg-text")).to_contain_text("Once upon a time wave0")
    page.click("#stop")
    settled(page)
    expect(answers(page).locator(".badge")).to_have_text("stopped")
    answers(page).locator("button.retry").click()
    expect(answers(page).locator(".pos")).to_have_text("2/2")
    settled(page)
    expect(answers(page).locator(".msg-text")).to_have_text("echo: tell me a story")
    records = api(served, f"conversations/{cid}/attempts")["attempts"]
    assert [r["status"] for r in records] == ["cancelled", "complete"]
    assert cid in ids(served)
    assert not errors, errors
