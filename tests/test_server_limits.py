"""Limits on what one client may hold of a worker: a body's time to arrive (issue 28)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _asgi_client import ASGIClient
from agents import set_tracing_disabled
from test_server_app import free_port
from test_server_bodies import app_on

from agents_state_ext.server import ServeSettings
from agents_state_ext.testing import MockResponsesAPI

set_tracing_disabled(True)

ROOT = Path(__file__).resolve().parents[1]
HALF = b'{"system": "be bri'


@pytest.mark.anyio
async def test_half_a_body_then_nothing_is_408_and_nothing_is_stored(
    mock: MockResponsesAPI,
) -> None:
    app = app_on(mock, body_timeout=0.2)
    store = app.state.chat_server.store
    client = ASGIClient(app)
    cid = (await client.post("/api/conversations", {}))[1]["id"]
    json_type = {"content-type": "application/json"}
    for path in ("/api/conversations", f"/api/conversations/{cid}/messages"):
        response = await client.open("POST", path, raw=HALF, headers=json_type, stall=True)
        assert response.status == 408, path
        assert response.headers["connection"] == "close"
        error = (await response.json())["error"]
        assert (error["type"], error["message"]) == (
            "RequestTimeout",
            "the body did not arrive within 0.2 seconds",
        )
    assert await store.list_conversations() == [cid]
    assert mock.requests == []
    assert (await client.post("/api/conversations", {}))[0] == 201  # a whole body is in time
    await app.state.chat_server.aclose()


def test_the_body_timeout_is_a_setting() -> None:
    assert ServeSettings().body_timeout == 30.0
    settings = ServeSettings.from_env({"AGENTS_STATE_EXT_BODY_TIMEOUT": "2.5"})
    assert settings.body_timeout == 2.5
    assert ServeSettings.from_env(settings.to_env()).body_timeout == 2.5
    for bad in ("0", "-1", "nan"):
        with pytest.raises(ValueError, match="body timeout must be positive"):
            ServeSettings.from_env({"AGENTS_STATE_EXT_BODY_TIMEOUT": bad}).check()
    with pytest.raises(ValueError, match="BODY_TIMEOUT must be a number"):
        ServeSettings.from_env({"AGENTS_STATE_EXT_BODY_TIMEOUT": "soon"})


@pytest.fixture
def uvicorn_app(tmp_path: Path) -> Iterator[int]:
    """``uvicorn --factory ...app_from_env`` with a 1 s body timeout; its port."""
    port = free_port()
    env = {
        **os.environ,
        "OPENAI_API_KEY": "",
        "PYTHONPATH": str(ROOT),
        "AGENTS_STATE_EXT_STORE": str(tmp_path / "limits.db"),
        "AGENTS_STATE_EXT_BODY_TIMEOUT": "1",
    }
    command = [sys.executable, "-m", "uvicorn", "--factory", "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--log-level", "warning", "agents_state_ext.server.app:app_from_env"],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(600):  # waiting for it to listen, not asserting on time
            assert server.poll() is None, server.communicate()[1]
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_a_real_server_answers_a_stalled_body_408_and_closes_the_connection(
    uvicorn_app: int,
) -> None:
    head = (
        "POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(HALF) * 2}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", uvicorn_app), timeout=60) as sock:
        sock.sendall(head.encode() + HALF)  # half the body it announced, then nothing
        answer = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout", answer
    assert b"connection: close" in rest.lower()
    assert b'"RequestTimeout"' in rest


@pytest.mark.anyio
async def test_a_body_over_max_message_bytes_is_413_and_nothing_is_sent(
    mock: MockResponsesAPI,
) -> None:
    app = app_on(mock, max_message_bytes=2000)
    client = ASGIClient(app)
    cid = (await client.post("/api/conversations", {}))[1]["id"]
    before = await client.get(f"/api/conversations/{cid}/export")
    for content, status in (("x" * 2000, 413), ("x" * 1900, 200)):
        response = await client.open(
            "POST", f"/api/conversations/{cid}/messages", {"content": content}
        )
        assert response.status == status
        if status == 413:
            error = (await response.json())["error"]
            assert error == {
                "type": "PayloadTooLarge",
                "message": "the body is over 2000 bytes (max_message_bytes)",
            }
            assert await client.get(f"/api/conversations/{cid}/export") == before
            assert mock.requests == []
        else:
            assert (await response.all_events())[-1][0] == "record"
    # a declared length over the limit is refused before the body is read
    status, answer = await client.post(
        "/api/conversations",
        raw=b"{}",
        headers={"content-type": "application/json", "content-length": "5000"},
    )
    assert (status, answer["error"]["type"]) == (413, "PayloadTooLarge")
    await app.state.chat_server.aclose()


def test_max_message_bytes_is_a_setting_and_256_kib_by_default() -> None:
    assert ServeSettings().max_message_bytes == 256 * 1024
    settings = ServeSettings.from_env({"AGENTS_STATE_EXT_MAX_MESSAGE": "1048576"})
    assert ServeSettings.from_env(settings.to_env()).max_message_bytes == 1 << 20
    with pytest.raises(ValueError, match="MAX_MESSAGE must be a whole number"):
        ServeSettings.from_env({"AGENTS_STATE_EXT_MAX_MESSAGE": "1e6"})
    with pytest.raises(ValueError, match="max_message_bytes must be positive"):
        ServeSettings(max_message_bytes=0).check()
