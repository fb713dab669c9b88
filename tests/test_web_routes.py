"""The browser page's routes: ``GET /`` and ``GET /ui/{name}``, beside the API, in every app.

Plain HTTP against the ASGI app (the page itself is driven in Chromium by test_web_ui.py).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urljoin

import pytest
from _asgi_client import ASGIClient
from agents import Agent
from starlette.applications import Starlette
from starlette.routing import Mount

from agents_state_ext import InMemoryStore
from agents_state_ext.server import ROUTES, ServeSettings, app_from_settings, create_app

pytestmark = pytest.mark.anyio

WEB = Path(__file__).resolve().parents[1] / "agents_state_ext" / "server" / "web"
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}


@pytest.fixture
async def client() -> AsyncIterator[ASGIClient]:
    store = InMemoryStore()
    app = create_app(store=store, agent=Agent(name="assistant"))
    yield ASGIClient(app)
    await app.state.chat_server.aclose()
    await store.aclose()


async def fetch(
    client: ASGIClient, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    response = await client.open("GET", path, headers=headers)
    return response.status, response.headers, await response.body()


def referenced(page: str, base: str) -> set[str]:
    """Every file the page loads, as absolute paths: its links and its modules' imports."""
    found = {urljoin(base, ref) for ref in re.findall(r'(?:src|href)="(ui/[^"]+)"', page)}
    for module in WEB.glob("*.js"):
        for name in re.findall(r'from "\./([\w.-]+)"', module.read_text()):
            found.add(urljoin(base, f"ui/{name}"))
    return found


async def test_the_page_is_html_with_a_strict_policy(client: ASGIClient) -> None:
    status, headers, body = await fetch(client, "/")

    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff"
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "connect-src 'self'" in policy
    page = body.decode()
    assert '<script type="module" src="ui/app.js"></script>' in page
    assert "http://" not in page and "https://" not in page  # nothing from another host


async def test_every_file_the_page_loads_is_served_with_its_type(client: ASGIClient) -> None:
    _, _, body = await fetch(client, "/")
    paths = referenced(body.decode(), "/")

    assert {"/ui/app.js", "/ui/style.css", "/ui/api.js"} <= paths
    for path in sorted(paths):
        status, headers, content = await fetch(client, path)
        assert status == 200, path
        assert headers["content-type"].startswith(TYPES[Path(path).suffix]), path
        assert content == (WEB / Path(path).name).read_bytes()


async def test_unknown_files_are_404_json(client: ASGIClient) -> None:
    for path in ("/ui/nope.js", "/ui/", "/ui/index.html", "/ui/__init__.py", "/ui/.hidden.js"):
        status, headers, body = await fetch(client, path)
        assert status == 404, path
        assert headers["content-type"] == "application/json"
        assert b'"NotFound"' in body


@pytest.mark.parametrize(
    "path",
    [
        "/ui/../pages.py",
        "/ui/../web/app.js",
        "/ui/..",
        "/ui/..%2Fpages.py",
        "/ui/%2e%2e/pages.py",
        "/ui/..\\pages.py",
        "/ui//etc/passwd",
        "/ui/app.js/../../pages.py",
        "/ui/" + str(WEB / "app.js"),
    ],
)
async def test_a_path_out_of_the_page_files_is_refused(client: ASGIClient, path: str) -> None:
    status, _, body = await fetch(client, path)

    assert status == 404
    assert b"import" not in body and b"def " not in body


async def test_head_and_revalidation(client: ASGIClient) -> None:
    head = await client.open("HEAD", "/ui/app.js")  # the HTTP server drops a HEAD's body
    assert head.status == 200 and head.headers["content-type"].startswith("text/javascript")
    etag = head.headers["etag"]
    assert head.headers["cache-control"] == "no-cache"

    status, headers, body = await fetch(client, "/ui/app.js", {"If-None-Match": etag})
    assert (status, body, headers["etag"]) == (304, b"", etag)
    status, _, body = await fetch(client, "/ui/app.js", {"If-None-Match": '"stale"'})
    assert status == 200 and body


async def test_the_page_needs_no_token_but_the_api_does() -> None:
    store = InMemoryStore()
    app = create_app(
        store=store, agent=Agent(name="assistant"), tokens={"alice": "alice-secret-0001"}
    )
    client = ASGIClient(app)

    assert (await fetch(client, "/"))[0] == 200
    assert (await fetch(client, "/ui/app.js"))[0] == 200
    status, headers, _ = await fetch(client, "/api/conversations")
    assert status == 401 and headers["www-authenticate"] == "Bearer"
    bearer = {"Authorization": "Bearer alice-secret-0001"}
    assert (await fetch(client, "/api/conversations", bearer))[0] == 200
    await store.aclose()


async def test_the_api_routes_are_unchanged_and_the_page_only_answers_get(
    client: ASGIClient,
) -> None:
    assert all(path.startswith("/api/") for _, path, _ in ROUTES)
    status, body = await client.request("POST", "/")
    assert status == 405 and body["error"]["type"] == "MethodNotAllowed"
    status, body = await client.get("/api/health")
    assert status == 200 and body["status"] == "ok"


async def test_mounted_under_a_prefix_the_page_and_its_files_resolve_there(
    client: ASGIClient,
) -> None:
    outer = ASGIClient(Starlette(routes=[Mount("/chat", app=client.app)]))

    status, _, body = await fetch(outer, "/chat/")
    assert status == 200
    paths = referenced(body.decode(), "/chat/")
    assert "/chat/ui/app.js" in paths
    for path in paths:
        assert (await fetch(outer, path))[0] == 200, path
    # the page calls the API relative to itself: "api/..." from /chat/ is /chat/api/...
    status, body = await outer.get(urljoin("/chat/", "api/health"))
    assert status == 200 and body["status"] == "ok"


async def test_serve_app_serves_the_page_before_its_store_is_open(tmp_path: Path) -> None:
    app = app_from_settings(ServeSettings(store=str(tmp_path / "page.db")))
    client = ASGIClient(app)

    status, headers, body = await fetch(client, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'src="ui/app.js"' in body
    assert (await fetch(client, "/ui/style.css"))[0] == 200
