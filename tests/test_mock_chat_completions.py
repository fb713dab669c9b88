"""The mock's ``POST /chat/completions``: strict openai types, the stream, its rules and faults."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.shared import ErrorObject
from test_mock_types import REPLIES as RESPONSE_REPLIES
from test_mock_types import problems

from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio


STREAMED = pytest.mark.parametrize("streamed", [False, True])
HI = [{"role": "user", "content": "hi"}]

# The Responses mock's reply kinds that a chat completion can carry (no refusals, parts or
# custom tools); reasoning is left out of the choice.
CARRIED = ("text", "chunks", "empty text", "function call", "parallel calls", "text then call")
REPLIES: dict[str, Callable[[], Reply]] = {
    kind: RESPONSE_REPLIES[kind] for kind in (*CARRIED, "reasoning", "incomplete")
}


@pytest.fixture
async def http() -> AsyncIterator[tuple[MockResponsesAPI, httpx2.AsyncClient]]:
    async with MockResponsesAPI() as mock, httpx2.AsyncClient(transport=mock.transport) as client:
        yield mock, client


async def post(pair: tuple[MockResponsesAPI, httpx2.AsyncClient], **body: Any) -> tuple[int, Any]:
    """Send one request: its status and JSON body, or for a stream the list of ``data:`` lines
    (JSON chunks, and the ``[DONE]`` marker as the string)."""
    mock, client = pair
    request = client.build_request(
        "POST", f"{mock.base_url}/chat/completions", json={"model": "gpt-4.1", **body}
    )
    response = await client.send(request, stream=True)
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.status_code, json.loads(await response.aread())
    lines: list[Any] = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            lines.append(data if data == "[DONE]" else json.loads(data))
    return response.status_code, lines


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The message and finish reason a client builds from the chunks, as openai's helper does."""
    content, calls, finish = "", {}, None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                into = calls.setdefault(call["index"], {"function": {"arguments": ""}})
                if "id" in call:
                    into.update(id=call["id"], type=call["type"])
                    into["function"]["name"] = call["function"]["name"]
                into["function"]["arguments"] += call["function"]["arguments"]
            finish = choice["finish_reason"] or finish
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)], "finish": finish}


@pytest.mark.parametrize("kind", sorted(REPLIES))
async def test_every_reply_is_a_strict_completion_and_its_stream_says_the_same(
    http: tuple[MockResponsesAPI, httpx2.AsyncClient], kind: str
) -> None:
    mock, _ = http
    mock.enqueue(REPLIES[kind](), REPLIES[kind]())
    status, body = await post(http, messages=HI)
    assert status == 200
    assert problems(ChatCompletion, body, "completion") == []
    status, lines = await post(
        http, messages=HI, stream=True, stream_options={"include_usage": True}
    )
    assert status == 200 and lines[-1] == "[DONE]"
    chunks = lines[:-1]
    found = [p for i, c in enumerate(chunks) for p in problems(ChatCompletionChunk, c, f"#{i}")]
    assert found == []
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == body["usage"]
    message, choice = body["choices"][0]["message"], body["choices"][0]
    streamed = assemble(chunks)
    assert streamed["content"] == (message["content"] or "")

    def no_ids(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in call.items() if k != "id"} for call in calls]

    assert no_ids(streamed["tool_calls"]) == no_ids(message.get("tool_calls", []))
    assert all(call["id"].startswith("call_") for call in streamed["tool_calls"])
    assert streamed["finish"] == choice["finish_reason"]
    calls = ("function call", "parallel calls", "text then call")
    finish = "length" if kind == "incomplete" else "tool_calls" if kind in calls else "stop"
    assert choice["finish_reason"] == finish
    assert body["choices"][0]["message"]["content"] != "one two three"  # no reasoning text


async def test_a_stream_without_include_usage_has_no_usage_chunk(
    http: tuple[MockResponsesAPI, httpx2.AsyncClient],
) -> None:
    _, lines = await post(http, messages=HI, stream=True)
    assert lines[-1] == "[DONE]"
    assert all("usage" not in chunk and chunk["choices"] for chunk in lines[:-1])
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in lines[:-1]) == "echo: hi"


async def test_openai_client_reads_both_forms_and_the_queue_is_shared_with_responses(
    http: tuple[MockResponsesAPI, httpx2.AsyncClient],
) -> None:
    mock, _ = http
    client = mock.client()
    mock.enqueue(Reply.text("from the queue"), Reply.text("responses next"))
    completion = await client.chat.completions.create(model="gpt-4.1", messages=HI)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "from the queue"
    response = await client.responses.create(model="gpt-4.1", input="hi")
    assert response.output_text == "responses next"
    stream = await client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "say it back"}],
        stream=True,
    )
    pieces = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    assert "".join(pieces) == "echo: say it back"  # the default responder, as for /responses
    assert [r.path for r in mock.requests] == [
        "/chat/completions",
        "/responses",
        "/chat/completions",
    ]
    assert mock.chat_requests[0]["messages"] == HI
    assert mock.response_ids == ["resp_1"]  # chat completions store nothing


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
ASKED = [*HI, {"role": "assistant", "content": None, "tool_calls": [CALL]}]
ANSWER = {"role": "tool", "tool_call_id": "call_1", "content": "42"}

REJECTED: dict[str, tuple[dict[str, Any], str, str | None]] = {
    "unknown parameter": (
        {"messages": HI, "input": "hi"},
        "Unrecognized request argument supplied: input",
        None,
    ),
    "no messages": ({"messages": []}, "Missing required parameter: 'messages'.", "messages"),
    "unknown role": ({"messages": [{"role": "robot", "content": "x"}]}, "Invalid value", None),
    "tool output without its call": (
        {"messages": [*HI, ANSWER]},
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
        "messages.[1].role",
    ),
    "tool output sent twice": (
        {"messages": [*ASKED, ANSWER, ANSWER]},
        "messages with role 'tool' must be a response",
        "messages.[3].role",
    ),
    "tool call without its output": (
        {"messages": [*ASKED, {"role": "user", "content": "and?"}]},
        "did not have response messages: call_1",
        "messages.[1].role",
    ),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
async def test_the_api_400s_consume_no_reply(
    http: tuple[MockResponsesAPI, httpx2.AsyncClient], case: str
) -> None:
    mock, _ = http
    mock.enqueue(Reply.text("kept"))
    body, message, param = REJECTED[case]
    status, error = await post(http, **body)
    assert status == 400
    assert problems(ErrorObject, error["error"], case) == []
    assert message in error["error"]["message"]
    if param is not None:
        assert error["error"]["param"] == param
    assert mock.pending_replies == 1
    status, ok = await post(http, messages=[*ASKED, ANSWER])
    assert (status, ok["choices"][0]["message"]["content"]) == (200, "kept")


async def test_a_missing_model_is_refused(
    http: tuple[MockResponsesAPI, httpx2.AsyncClient],
) -> None:
    status, error = await post(http, model=None, messages=HI)
    assert status == 400 and error["error"]["message"] == "you must provide a model parameter"


@STREAMED
async def test_faults_reach_the_openai_client(streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        client = mock.client()

        async def ask() -> str:
            if not streamed:
                answer = await client.chat.completions.create(model="gpt-4.1", messages=HI)  # type: ignore[arg-type]
                return answer.choices[0].message.content or ""
            stream = await client.chat.completions.create(
                model="gpt-4.1",
                messages=HI,  # type: ignore[arg-type]
                stream=True,
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        mock.enqueue(Reply.text("one two three"))
        mock.inject(Fault.status(500))
        with pytest.raises(openai.InternalServerError):
            await ask()
        mock.inject(Fault.rate_limit(retry_after=2))
        with pytest.raises(openai.RateLimitError):
            await ask()
        mock.inject(Fault.drop_mid_stream(2))
        with pytest.raises(openai.APIConnectionError):
            await ask()
        mock.inject(Fault.stream_error(2, message="overloaded"))
        with pytest.raises(openai.APIError, match="overloaded" if streamed else "server"):
            await ask()
        assert mock.pending_replies == 1  # none of the failures used the reply up
        assert await ask() == "one two three"
        events = [r.events for r in mock.requests if r.streamed]
        if streamed:
            assert events[2] == ["chunk.role", "chunk.content"]  # then the connection dropped
            assert events[3] == ["chunk.role", "chunk.content", "error"]
            assert events[4][-2:] == ["chunk.finish", "[DONE]"]
