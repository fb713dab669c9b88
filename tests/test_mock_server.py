"""MockResponsesAPI: stored context, chaining, rejections, SSE, faults and a real Runner."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled

from agents_state_ext.testing import (
    MockResponsesAPI,
    Reply,
    ResponseContext,
    Usage,
    describe_items,
)

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


def error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    assert isinstance(exc.body, dict)
    return exc.body


async def test_default_reply_echoes_last_user_message_and_stores_context(
    mock: MockResponsesAPI,
) -> None:
    client = mock.client()
    response = await client.responses.create(model="gpt-4.1", input="hi there")
    assert response.id == "resp_1"
    assert response.output_text == "echo: hi there"
    assert response.status == "completed"
    assert mock.transcript("resp_1") == [
        {
            "type": "message",
            "id": "msg_1",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi there"}],
            "status": "completed",
        },
        {
            "type": "message",
            "id": "msg_2",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "echo: hi there", "annotations": [], "logprobs": []}
            ],
        },
    ]
    assert mock.response("resp_1")["output"][0]["id"] == "msg_2"


async def test_previous_response_id_chains_full_context(mock: MockResponsesAPI) -> None:
    client = mock.client()
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    first = await client.responses.create(model="gpt-4.1", input="a")
    second = await client.responses.create(
        model="gpt-4.1",
        input=[{"role": "user", "content": "b"}],
        previous_response_id=first.id,
    )
    assert second.previous_response_id == first.id
    assert describe_items(mock.transcript(second.id)) == [
        "user: a",
        "assistant: one",
        "user: b",
        "assistant: two",
    ]
    assert mock.response_ids == [first.id, second.id]


async def test_store_false_is_not_stored_and_cannot_be_chained(mock: MockResponsesAPI) -> None:
    client = mock.client()
    response = await client.responses.create(model="gpt-4.1", input="a", store=False)
    assert response.output_text == "echo: a"
    with pytest.raises(KeyError):
        mock.transcript(response.id)
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(model="gpt-4.1", input="b", previous_response_id=response.id)


async def test_unknown_previous_response_id_is_rejected(mock: MockResponsesAPI) -> None:
    client = mock.client()
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(model="gpt-4.1", input="b", previous_response_id="resp_x")
    assert error_body(info.value) == {
        "message": "Previous response with id 'resp_x' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }
    assert mock.requests[-1].status == 400
    assert mock.response_ids == []


async def test_unknown_previous_response_status_is_switchable() -> None:
    async with MockResponsesAPI(previous_response_not_found_status=404) as mock:
        with pytest.raises(openai.NotFoundError):
            await mock.client().responses.create(
                model="gpt-4.1", input="b", previous_response_id="resp_x"
            )


async def test_conversation_with_previous_response_id_is_rejected_first(
    mock: MockResponsesAPI,
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await mock.client().responses.create(
            model="gpt-4.1", input="b", previous_response_id="resp_x", conversation="conv_x"
        )
    assert error_body(info.value)["code"] == "mutually_exclusive_parameters"
    assert "Mutually exclusive parameters" in error_body(info.value)["message"]


async def test_unknown_conversation_is_404(mock: MockResponsesAPI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        await mock.client().responses.create(model="gpt-4.1", input="b", conversation="conv_x")
    assert error_body(info.value)["message"] == "Conversation with id 'conv_x' not found."


async def test_resending_an_item_of_the_chain_is_a_duplicate(mock: MockResponsesAPI) -> None:
    client = mock.client()
    first = await client.responses.create(model="gpt-4.1", input="a")
    replay: list[Any] = [item.model_dump(exclude_none=True) for item in first.output]
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(model="gpt-4.1", input=replay, previous_response_id=first.id)
    assert error_body(info.value) == {
        "message": "Duplicate item found with id msg_2. Remove duplicate items from your input "
        "and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    assert mock.response_ids == [first.id]


async def test_duplicate_ids_within_one_input_are_rejected(mock: MockResponsesAPI) -> None:
    item = {"type": "message", "id": "msg_a", "role": "user", "content": "x"}
    with pytest.raises(openai.BadRequestError, match="Duplicate item found with id msg_a"):
        await mock.client().responses.create(model="gpt-4.1", input=[item, item])  # type: ignore[list-item]


async def test_tool_output_without_call_is_rejected(mock: MockResponsesAPI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await mock.client().responses.create(
            model="gpt-4.1",
            input=[{"type": "function_call_output", "call_id": "call_9", "output": "x"}],
        )
    assert error_body(info.value)["message"] == (
        "No tool call found for function call output with call_id call_9."
    )


async def test_orphan_tool_call_in_context_is_rejected(mock: MockResponsesAPI) -> None:
    client = mock.client()
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}))
    first = await client.responses.create(model="gpt-4.1", input="weather?")
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(model="gpt-4.1", input="hi", previous_response_id=first.id)
    assert error_body(info.value)["message"] == "No tool output found for function call call_1."


async def test_orphan_tool_call_check_can_be_disabled() -> None:
    async with MockResponsesAPI(reject_orphan_tool_calls=False) as mock:
        client = mock.client()
        mock.enqueue(Reply.tool_call("f", {}))
        first = await client.responses.create(model="gpt-4.1", input="x")
        second = await client.responses.create(
            model="gpt-4.1", input="hi", previous_response_id=first.id
        )
        assert second.output_text == "echo: hi"


async def test_tool_call_turn_then_output(mock: MockResponsesAPI) -> None:
    client = mock.client()
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("sunny"))
    first = await client.responses.create(model="gpt-4.1", input="weather?")
    call = first.output[0].model_dump(exclude_none=True)
    assert call == {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    }
    second = await client.responses.create(
        model="gpt-4.1",
        input=[{"type": "function_call_output", "call_id": "call_1", "output": "18C"}],
        previous_response_id=first.id,
    )
    assert describe_items(mock.transcript(second.id)) == [
        "user: weather?",
        'function_call get_weather {"city": "Paris"} [call_1]',
        "function_call_output [call_1]: 18C",
        "assistant: sunny",
    ]
    assert mock.transcript(second.id)[2]["id"] == "fco_1"


async def test_reply_combinations_and_usage(mock: MockResponsesAPI) -> None:
    mock.enqueue(
        Reply.text("checking")
        + Reply.tool_calls([("a", {"x": 1}), ("b", "{}")], usage=Usage(7, 3)),
        Reply.tool_call("c", {}, call_id="call_mine"),
    )
    client = mock.client()
    first = await client.responses.create(model="gpt-4.1", input="go")
    assert [item.type for item in first.output] == ["message", "function_call", "function_call"]
    assert [getattr(item, "call_id", None) for item in first.output] == [None, "call_1", "call_2"]
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (7, 3)
    second = await client.responses.create(model="gpt-4.1", input="go")
    assert second.output[0].model_dump()["call_id"] == "call_mine"


async def test_responder_is_used_when_queue_is_empty(mock: MockResponsesAPI) -> None:
    seen: list[ResponseContext] = []

    def responder(context: ResponseContext) -> Reply:
        seen.append(context)
        return Reply.text(f"#{context.call_index} {len(context.items)}")

    mock.responder = responder
    mock.enqueue(Reply.text("queued"))
    client = mock.client()
    first = await client.responses.create(model="gpt-4.1", input="a")
    second = await client.responses.create(
        model="gpt-4.1", input="b", previous_response_id=first.id
    )
    assert (first.output_text, second.output_text) == ("queued", "#1 3")
    assert seen[0].previous_response_id == first.id
    assert seen[0].last_user_text == "b"


async def test_request_log_and_reset(mock: MockResponsesAPI) -> None:
    client = mock.client()
    await client.responses.create(model="gpt-4.1", input="a", instructions="be brief")
    record = mock.requests[0]
    assert (record.method, record.path, record.status, record.streamed) == (
        "POST",
        "/responses",
        200,
        False,
    )
    assert record.response_id == "resp_1"
    assert mock.response_requests == [
        {"input": "a", "model": "gpt-4.1", "instructions": "be brief"}
    ]
    mock.enqueue(Reply.text("x"))
    mock.reset()
    assert (mock.requests, mock.response_ids, mock.pending_replies) == ([], [], 0)
    again = await client.responses.create(model="gpt-4.1", input="b")
    assert again.id == "resp_1"


async def test_unknown_path_is_404_and_other_hosts_fail(mock: MockResponsesAPI) -> None:
    async with httpx2.AsyncClient(transport=mock.transport) as http:
        response = await http.get("https://api.openai.com/v1/nope")
        assert response.status_code == 404
        with pytest.raises(Exception, match="not mocked"):
            await http.get("https://example.com/")


def test_sync_context_manager_outside_a_loop() -> None:
    with MockResponsesAPI() as mock:
        client = mock.client()
        response = asyncio.run(client.responses.create(model="gpt-4.1", input="sync"))
        assert response.output_text == "echo: sync"
    with pytest.raises(RuntimeError):
        _ = mock.router


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


async def run_agent(agent: Agent[Any], streamed: bool, text: str, **kwargs: Any) -> Any:
    if streamed:
        result = Runner.run_streamed(agent, text, **kwargs)
        async for _ in result.stream_events():
            pass
        return result
    return await Runner.run(agent, text, **kwargs)


@pytest.mark.parametrize("streamed", [False, True])
async def test_runner_tool_turn_with_auto_previous_response_id(streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("It is sunny."))
        agent = Agent(name="a", model=mock.model(), tools=[get_weather])
        result = await run_agent(agent, streamed, "weather?", auto_previous_response_id=True)
        assert result.final_output == "It is sunny."
        wire = mock.response_requests
        assert [body.get("stream", False) for body in wire] == [streamed, streamed]
        assert wire[0]["input"] == [{"content": "weather?", "role": "user"}]
        assert "previous_response_id" not in wire[0]
        assert wire[1]["previous_response_id"] == "resp_1"
        assert [item["type"] for item in wire[1]["input"]] == ["function_call_output"]
        assert describe_items(mock.transcript("resp_2")) == [
            "user: weather?",
            'function_call get_weather {"city": "Paris"} [call_1]',
            "function_call_output [call_1]: sunny in Paris",
            "assistant: It is sunny.",
        ]


@pytest.mark.parametrize("streamed", [False, True])
async def test_runner_with_conversation_id(streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        conversation_id = mock.create_conversation()
        mock.enqueue(Reply.tool_call("get_weather", {"city": "Oslo"}), Reply.text("Cold."))
        agent = Agent(name="a", model=mock.model(), tools=[get_weather])
        result = await run_agent(agent, streamed, "weather?", conversation_id=conversation_id)
        assert result.final_output == "Cold."
        second = await run_agent(agent, streamed, "thanks", conversation_id=conversation_id)
        assert second.final_output == "echo: thanks"
        assert [body["conversation"] for body in mock.response_requests] == [conversation_id] * 3
        assert describe_items(mock.conversation_items(conversation_id)) == [
            "user: weather?",
            'function_call get_weather {"city": "Oslo"} [call_1]',
            "function_call_output [call_1]: sunny in Oslo",
            "assistant: Cold.",
            "user: thanks",
            "assistant: echo: thanks",
        ]


async def test_a_deleted_response_is_gone_like_an_unknown_one(mock: MockResponsesAPI) -> None:
    client = mock.client()
    first = await client.responses.create(model="gpt-4.1", input="a")
    second = await client.responses.create(model="gpt-4.1", input="b")
    async with httpx2.AsyncClient(transport=mock.transport) as http:
        answer = await http.delete(f"{mock.base_url}/responses/{first.id}")
    assert (answer.status_code, answer.json()) == (
        200,
        {"id": first.id, "object": "response", "deleted": True},
    )
    assert mock.response_ids == [second.id]
    with pytest.raises(openai.NotFoundError) as info:
        await client.responses.retrieve(first.id)
    assert error_body(info.value)["message"] == f"Response with id '{first.id}' not found."
    with pytest.raises(openai.NotFoundError):
        await client.responses.delete(first.id)  # a second delete: the same 404
    with pytest.raises(openai.BadRequestError) as chained:
        await client.responses.create(model="gpt-4.1", input="c", previous_response_id=first.id)
    assert error_body(chained.value)["code"] == "previous_response_not_found"
    await client.responses.delete(second.id)  # through the SDK's own method
    assert mock.response_ids == []
    assert [(r.method, r.path, r.status) for r in mock.requests if r.method == "DELETE"] == [
        ("DELETE", f"/responses/{first.id}", 200),
        ("DELETE", f"/responses/{first.id}", 404),
        ("DELETE", f"/responses/{second.id}", 200),
    ]


async def test_a_lone_surrogate_in_a_non_streamed_reply_is_sent_as_its_json_escape(
    mock: MockResponsesAPI,
) -> None:
    mock.enqueue(Reply.text("bad \ud800 text"))
    client = mock.client()
    raw = await client.responses.with_raw_response.create(model="gpt-4.1", input="hi")
    assert b'"bad \\ud800 text"' in raw.content  # as the real API sends it: ASCII JSON
    assert raw.parse().output_text == "bad \ud800 text"
