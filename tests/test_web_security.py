"""A hostile page in a real Chromium against the app ``serve`` runs (issue 28).

Chromium resolves ``rebind.test`` and ``attacker.test`` to 127.0.0.1 (``--host-resolver-rules``),
which is what a DNS rebinding attack arranges: the page at ``rebind.test`` is answered 421, and
the page at ``attacker.test`` cannot create, send or stop anything on the server with the
requests a page may send to another origin (``no-cors`` fetches, a ``text/plain`` form).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from agents_state_ext.server import ServeSettings, app_from_settings

sync_api = pytest.importorskip("playwright.sync_api")

RULES = "MAP rebind.test 127.0.0.1, MAP attacker.test 127.0.0.1"


class Served:
    """An ASGI app on uvicorn in a thread, on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:  # waiting for startup, not asserting on time
            assert self.thread.is_alive() and time.monotonic() < deadline, "did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


@pytest.fixture(autouse=True)
def drop_test_databases() -> None:
    """Replaces tests/conftest.py's (nothing here uses a database; Playwright's sync API
    keeps an event loop running in this thread)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = os.environ.get("STATE_EXT_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.skip("the browser tests need Chromium: install it or set STATE_EXT_CHROMIUM")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=path, args=[f"--host-resolver-rules={RULES}"]
        )
        yield launched
        launched.close()


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Served]:
    with Served(app_from_settings(ServeSettings(store=str(tmp_path / "web.db")))) as server:
        yield server


def attacker_site() -> Starlette:
    async def index(request: Any) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>cats</title><iframe name=sink></iframe>")

    return Starlette(routes=[Route("/", index)])


def conversations(port: int) -> list[Any]:
    answer = httpx.get(f"http://127.0.0.1:{port}/api/conversations", timeout=30)
    return list(answer.json()["conversations"])


def test_a_rebound_name_gets_421_and_the_page_works_on_its_own_host(
    browser: Any, served: Served
) -> None:
    page = browser.new_page()
    try:
        response = page.goto(f"http://rebind.test:{served.port}/")
        assert response is not None and response.status == 421
        status = page.evaluate(
            "fetch('/api/conversations', {method: 'POST', headers: {'Content-Type': "
            "'application/json'}, body: '{}'}).then(r => r.status)"
        )
        assert status == 421
        assert conversations(served.port) == []
        response = page.goto(f"http://127.0.0.1:{served.port}/")
        assert response is not None and response.status == 200
        created = page.evaluate(
            "fetch('api/conversations', {method: 'POST', headers: {'Content-Type': "
            "'application/json'}, body: '{}'}).then(r => r.status)"
        )
        assert created == 201
        assert len(conversations(served.port)) == 1
    finally:
        page.close()


def test_another_site_cannot_create_send_or_stop(browser: Any, served: Served) -> None:
    cid = httpx.post(f"http://127.0.0.1:{served.port}/api/conversations", json={}).json()["id"]
    with Served(attacker_site()) as attacker:
        page = browser.new_page()
        try:
            page.goto(f"http://attacker.test:{attacker.port}/")
            target = f"http://127.0.0.1:{served.port}/api/conversations"
            page.evaluate(
                """async ([target, cid]) => {
                  const plain = (url, body) => fetch(url, {method: 'POST', mode: 'no-cors',
                    headers: {'Content-Type': 'text/plain'}, body});
                  await plain(target, '{"system": "pwned"}');
                  await plain(`${target}/${cid}/messages`, '{"content": "spend the key"}');
                  await fetch(target, {method: 'POST', mode: 'no-cors',
                    body: new Blob(['{"system": "pwned"}'])});
                  await fetch(`${target}/${cid}/stop`, {method: 'POST', mode: 'no-cors'});
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
                }""",
                [target, cid],
            )
        finally:
            page.close()
    assert [c["id"] for c in conversations(served.port)] == [cid]
    shown = httpx.get(f"http://127.0.0.1:{served.port}/api/conversations/{cid}", timeout=30)
    assert shown.json()["active_path"] == []
