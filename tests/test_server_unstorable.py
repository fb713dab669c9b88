"""An answer no store can keep (a lone surrogate from the model) over the server's SSE (issue 28).

The model's text is sent on as its JSON escape, the stream still ends with its one closing
event, and the attempt is final on that request: stored as failed, its record valid, the
client told with a 5xx (the model's doing, not the client's), the conversation usable after.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from _asgi_client import ASGIClient
from agents import Agent, set_tracing_disabled

from agents_state_ext.server import create_app
from agents_state_ext.stores import SQLiteStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
async def test_a_lone_surrogate_in_the_answer_is_escaped_and_the_attempt_ends_failed_with_502(
    mock: MockResponsesAPI, tmp_path: Path, stream: bool
) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    app = create_app(
        store=store,
        agent=Agent(name="assistant", model=mock.model()),
        chat_options={"counter": FixedTokenCounter()},
    )
    client = ASGIClient(app)
    cid = (await client.post("/api/conversations", {}))[1]["id"]
    mock.enqueue(Reply.text("bad \ud800 text", chunks=["bad ", "\ud800", " text"]))
    body = {"content": "hi", "stream": stream}
    response = await client.open("POST", f"/api/conversations/{cid}/messages", body)
    raw = await asyncio.wait_for(response.body(), 60)

    wire = raw.decode("utf-8")  # every byte sent is UTF-8
    text = '"\\ud800"' if stream else '"bad \\ud800 text"'  # the surrogate as its JSON escape
    assert f'data: {{"text":{text}}}' in wire
    frames = [frame for frame in wire.split("\n\n") if frame.startswith("event: ")]
    events = [(f.split("\n")[0][7:], json.loads(f.split("\n")[1][6:])) for f in frames]
    closing = [name for name, _ in events if name in ("record", "error")]
    assert closing == ["error"] and events[-1][0] == "error"
    # no event claims a status the store does not hold: its end was never stored as complete
    claimed = [data["status"] for name, data in events if name == "attempt"]
    assert "complete" not in claimed, claimed
    error = events[-1][1]
    assert (error["status"], error["type"]) == (502, "AnswerNotStored"), error
    assert "Unicode" in error["message"] and "codec" not in error["message"]
    assert error["record"]["status"] == "failed"

    status, attempts = await client.get(f"/api/conversations/{cid}/attempts")
    assert status == 200
    assert [a["status"] for a in attempts["attempts"]] == ["failed"]
    assert attempts["attempts"][0] == error["record"]
    status, tree = await client.get(f"/api/conversations/{cid}/tree")
    assert status == 200 and [n["status"] for n in tree["nodes"]] == ["complete", "failed"]

    mock.enqueue(Reply.text("fine"))
    again = await client.open("POST", f"/api/conversations/{cid}/messages", {"content": "again"})
    name, record = (await asyncio.wait_for(again.all_events(), 60))[-1]
    assert (name, record["status"]) == ("record", "complete")
    await app.state.chat_server.aclose()
    await store.aclose()
