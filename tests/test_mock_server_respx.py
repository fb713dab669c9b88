"""MockResponsesAPI on respx: classic ``httpx`` clients reach the same fake through ``router``."""

from __future__ import annotations

import httpx
import openai
import pytest
import respx
from _grammar import START, message, through
from _grammar import stream as stream_of

from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio


async def test_the_router_serves_classic_httpx_clients(mock: MockResponsesAPI) -> None:
    assert isinstance(mock.router, respx.MockRouter)
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{mock.base_url}/nope")).status_code == 404
        with pytest.raises(Exception, match="not mocked"):
            await http.get("https://example.com/")
        client = mock.client(http_client=http)
        mock.enqueue(Reply.text("plain"), Reply.text("a b", chunks=["a ", "b"]))
        first = await client.responses.create(model="gpt-4.1", input="hi")
        stream = await client.responses.create(
            model="gpt-4.1", input="again", previous_response_id=first.id, stream=True
        )
        events = [event.type async for event in stream]
    assert first.output_text == "plain"
    assert events[-1] == "response.completed"
    said = [m["content"][0]["text"] for m in mock.transcript("resp_2") if m.get("role") == "user"]
    assert said == ["hi", "again"]


async def test_transport_faults_arrive_as_classic_httpx_errors(mock: MockResponsesAPI) -> None:
    async with httpx.AsyncClient() as http:
        _ = mock.router
        client = mock.client(http_client=http)
        mock.inject(Fault.timeout())
        with pytest.raises(openai.APITimeoutError):
            await client.responses.create(model="gpt-4.1", input="x")
        expected = stream_of(message(2))
        mock.inject(Fault.drop_mid_stream(through(expected, "response.output_item.added")))
        with pytest.raises(openai.APIConnectionError) as caught:
            stream = await client.responses.create(model="gpt-4.1", input="x", stream=True)
            async for _ in stream:
                pass
    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError)
    assert mock.requests[-1].events == [*START, "response.output_item.added"]


async def test_the_router_stops_with_the_mock() -> None:
    async with MockResponsesAPI() as mock:
        router = mock.router
        assert mock.router is router
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.HTTPError):
            await http.get("http://127.0.0.1:9/v1/responses")
    with pytest.raises(RuntimeError):
        _ = mock.router
