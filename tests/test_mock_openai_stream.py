"""openai's own stream helpers over the mock: ``responses.stream`` and ``create(stream=True)``.

The helper (``openai/lib/streaming/responses/_responses.py``) rebuilds the response from the
events, so it fails on a stream that skips an event it indexes into (a missing
``response.content_part.added`` is an ``IndexError``).
"""

from __future__ import annotations

import json

import openai
import pytest
from agents import Agent, Runner, set_tracing_disabled

from agents_state_ext.testing import MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


async def test_the_stream_helper_rebuilds_a_text_answer(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("hello there friend"))
    async with mock.client().responses.stream(model="gpt-4.1", input="hi") as stream:
        snapshots = [e.snapshot async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert snapshots == ["hello ", "hello there ", "hello there friend"]
    assert final.output_text == "hello there friend"
    assert final.id == "resp_1" and final.status == "completed"
    assert final.model_dump(mode="json", exclude_none=True)["output"] == [
        {k: v for k, v in item.items() if v is not None}
        for item in mock.response("resp_1")["output"]
    ]


async def test_the_stream_helper_rebuilds_a_function_call(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_p"))
    async with mock.client().responses.stream(model="gpt-4.1", input="weather?") as stream:
        snapshots = [
            e.snapshot async for e in stream if e.type == "response.function_call_arguments.delta"
        ]
        final = await stream.get_final_response()
    assert snapshots[-1] == '{"city": "Paris"}'
    [call] = final.output
    assert call.type == "function_call"
    assert (call.name, call.call_id, json.loads(call.arguments)) == (
        "get_weather",
        "call_p",
        {"city": "Paris"},
    )


async def test_the_stream_helper_over_a_reasoning_model(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("the answer", reasoning="think first"))
    async with mock.client().responses.stream(model="gpt-5", input="why?") as stream:
        types = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert types.count("response.reasoning_summary_text.delta") == 2
    assert [item.type for item in final.output] == ["reasoning", "message"]
    reasoning = final.output[0]
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == "think first"
    assert final.output_text == "the answer"


async def test_the_sdk_streams_a_reasoning_model_over_the_mock(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("the answer"))
    result = Runner.run_streamed(Agent(name="a", model=mock.model("gpt-5")), "why?")
    kinds = [event.type async for event in result.stream_events()]
    assert result.final_output == "the answer" and "raw_response_event" in kinds
    assert [item["type"] for item in mock.response("resp_1")["output"]] == [
        "reasoning",
        "message",
    ]


async def test_create_stream_true_yields_every_event_typed(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("a b") + Reply.tool_call("f", {}))
    stream = await mock.client().responses.create(model="gpt-4.1", input="x", stream=True)
    events = [event async for event in stream]
    # A type openai does not know would come back as a bare BaseModel, not its event class.
    assert all(type(e).__name__.startswith("Response") for e in events)
    done = [e.item.id for e in events if e.type == "response.output_item.done"]
    assert done == [item["id"] for item in mock.response("resp_1")["output"]]


async def test_input_items_lists_the_context_of_a_response(mock: MockResponsesAPI) -> None:
    client = mock.client()
    mock.enqueue(Reply.tool_call("f", {}, call_id="call_1"), Reply.text("done"))
    first = await client.responses.create(model="gpt-4.1", input="hi")
    output = {"type": "function_call_output", "call_id": "call_1", "output": "42"}
    second = await client.responses.create(
        model="gpt-4.1", input=[output], previous_response_id=first.id
    )
    page = await client.responses.input_items.list(second.id, order="asc")
    kinds = [item.type for item in page.data]
    assert kinds == ["message", "function_call", "function_call_output"]
    assert [item.id for item in page.data] == [
        item["id"] for item in mock.transcript(second.id)[:3]
    ]
    assert (page.first_id, page.last_id, page.has_more) == (
        page.data[0].id,
        page.data[-1].id,
        False,
    )
    newest = await client.responses.input_items.list(second.id, limit=2)
    assert [item.type for item in newest.data] == ["function_call_output", "function_call"]
    assert newest.has_more
    rest = await client.responses.input_items.list(second.id, limit=2, after=newest.last_id)
    assert [item.type for item in rest.data] == ["message"] and not rest.has_more
    every = [item.id async for item in client.responses.input_items.list(second.id, limit=1)]
    assert every == [item.id for item in reversed(page.data)]
    wire = [(r.method, r.path, r.params) for r in mock.requests if "input_items" in r.path]
    last = ("GET", f"/responses/{second.id}/input_items", {"limit": "1", "after": every[-2]})
    assert wire[-1] == last


async def test_input_items_of_an_unknown_response_is_404(mock: MockResponsesAPI) -> None:
    with pytest.raises(openai.NotFoundError, match="resp_nope"):
        await mock.client().responses.input_items.list("resp_nope")
