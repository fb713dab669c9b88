"""MockResponsesAPI: the SSE wire shape, streamed storage and interrupted streams."""

from __future__ import annotations

import asyncio
import json

import httpx2
import openai
import pytest
from agents import Agent, Runner, set_tracing_disabled

from agents_state_ext.testing import MockResponsesAPI, Reply, describe_items

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


async def test_sse_frames_on_the_wire(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("a b", chunks=["a ", "b"]) + Reply.tool_call("f", {"x": 1}))
    async with httpx2.AsyncClient(transport=mock.transport) as http:
        response = await http.post(
            f"{mock.base_url}/responses", json={"model": "gpt-4.1", "input": "hi", "stream": True}
        )
    assert response.headers["content-type"] == "text/event-stream"
    frames = [f for f in response.text.split("\n\n") if f]
    events = []
    for frame in frames:
        event_line, data_line = frame.split("\n")
        event = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {event['type']}"
        events.append(event)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(15))
    created, in_progress = events[0]["response"], events[1]["response"]
    assert (created["id"], created["status"], created["output"]) == ("resp_1", "in_progress", [])
    assert in_progress == created
    text = {"item_id": "msg_2", "output_index": 0, "content_index": 0}
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    assert events[3]["part"] == empty
    assert [e["delta"] for e in events[4:6]] == ["a ", "b"]
    assert all(e["logprobs"] == [] for e in events[4:7])
    assert (events[6]["text"], events[7]["part"]["text"]) == ("a b", "a b")
    for event in events[3:8]:
        assert {k: event[k] for k in text} == text
    assert events[9]["item"]["arguments"] == ""
    call = {"item_id": "fc_1", "output_index": 1}
    for event in events[10:13]:
        assert {k: event[k] for k in call} == call
    assert [e["delta"] for e in events[10:12]] == ['{"x": ', "1}"]
    assert events[12]["arguments"] == '{"x": 1}'
    assert events[13]["item"] == mock.response("resp_1")["output"][1]
    completed = events[-1]["response"]
    assert completed["status"] == "completed"
    assert completed["output"] == mock.response("resp_1")["output"]
    assert mock.requests[0].streamed and mock.requests[0].status == 200


async def test_openai_client_parses_the_stream(mock: MockResponsesAPI) -> None:
    client = mock.client()
    mock.enqueue(Reply.text("hello there friend"))
    stream = await client.responses.create(model="gpt-4.1", input="hi", stream=True)
    deltas: list[str] = []
    final = None
    async for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        if event.type == "response.completed":
            final = event.response
    assert "".join(deltas) == "hello there friend"
    assert len(deltas) == 3
    assert final is not None and final.output_text == "hello there friend"
    assert describe_items(mock.transcript(final.id)) == [
        "user: hi",
        "assistant: hello there friend",
    ]


async def test_stream_is_stored_only_at_completion(mock: MockResponsesAPI) -> None:
    client = mock.client()
    conversation_id = mock.create_conversation()
    mock.enqueue(Reply.text("one two three four five six", delay=0.01))
    stream = await client.responses.create(
        model="gpt-4.1", input="hi", conversation=conversation_id, stream=True
    )
    seen = []
    async for event in stream:
        seen.append(event.type)
        if event.type == "response.output_text.delta":
            assert mock.response_ids == []
            await stream.close()
            break
    assert seen[-1] == "response.output_text.delta"
    assert mock.response_ids == []
    assert mock.conversation_items(conversation_id) == []
    with pytest.raises(openai.BadRequestError, match="not found"):
        await client.responses.create(model="gpt-4.1", input="x", previous_response_id="resp_1")


async def test_interrupted_stream_can_be_stored_without_conversation_append() -> None:
    async with MockResponsesAPI(store_interrupted_streams=True) as mock:
        client = mock.client()
        conversation_id = mock.create_conversation()
        stream = await client.responses.create(
            model="gpt-4.1", input="hi", conversation=conversation_id, stream=True
        )
        async for _ in stream:
            await stream.close()
            break
        assert mock.response("resp_1")["status"] == "completed"
        assert describe_items(mock.transcript("resp_1")) == ["user: hi", "assistant: echo: hi"]
        assert mock.conversation_items(conversation_id) == []


@pytest.mark.parametrize("streamed", [False, True])
async def test_cancelling_a_slow_run_stores_nothing(mock: MockResponsesAPI, streamed: bool) -> None:
    mock.enqueue(Reply.text("one two three four five six seven", delay=0.3))
    agent = Agent(name="a", model=mock.model())

    async def run() -> None:
        if streamed:
            result = Runner.run_streamed(agent, "hi", auto_previous_response_id=True)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, "hi", auto_previous_response_id=True)

    task = asyncio.ensure_future(run())
    await asyncio.sleep(0.08)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert mock.response_ids == []
    assert len(mock.response_requests) == 1


async def test_conversation_lock_while_a_stream_is_in_flight() -> None:
    async with MockResponsesAPI(lock_conversations=True) as mock:
        client = mock.client()
        conversation_id = mock.create_conversation()
        stream = await client.responses.create(
            model="gpt-4.1", input="a", conversation=conversation_id, stream=True
        )
        with pytest.raises(openai.BadRequestError) as info:
            await client.responses.create(model="gpt-4.1", input="b", conversation=conversation_id)
        assert isinstance(info.value.body, dict)
        assert info.value.body["code"] == "conversation_locked"
        async for _ in stream:
            pass
        after = await client.responses.create(
            model="gpt-4.1", input="b", conversation=conversation_id
        )
        assert after.output_text == "echo: b"


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("append", [True, False])
async def test_incomplete_reply(streamed: bool, append: bool) -> None:
    async with MockResponsesAPI(append_incomplete_to_conversation=append) as mock:
        client = mock.client()
        conversation_id = mock.create_conversation()
        mock.enqueue(Reply.text("partial").as_incomplete())
        if streamed:
            stream = await client.responses.create(
                model="gpt-4.1", input="a", conversation=conversation_id, stream=True
            )
            types = [event.type async for event in stream]
            assert types[-1] == "response.incomplete"
        else:
            response = await client.responses.create(
                model="gpt-4.1", input="a", conversation=conversation_id
            )
            assert response.status == "incomplete"
            assert response.incomplete_details is not None
        assert mock.response("resp_1")["status"] == "incomplete"
        expected = ["user: a", "assistant: partial"] if append else []
        assert describe_items(mock.conversation_items(conversation_id)) == expected


async def test_item_reference_resolves_to_the_stored_item(mock: MockResponsesAPI) -> None:
    client = mock.client()
    first = await client.responses.create(model="gpt-4.1", input="a")
    second = await client.responses.create(
        model="gpt-4.1",
        input=[{"type": "item_reference", "id": "msg_1"}, {"role": "user", "content": "b"}],
    )
    assert describe_items(mock.transcript(second.id))[:2] == ["user: a", "user: b"]
    assert first.id != second.id
    with pytest.raises(openai.NotFoundError, match="Item with id 'msg_x' not found"):
        await client.responses.create(
            model="gpt-4.1", input=[{"type": "item_reference", "id": "msg_x"}]
        )
