"""MockResponsesAPI: the real API's 400s for malformed requests (``validate_requests``)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import httpx2
import openai
import pytest
from agents import Agent, ModelSettings, OpenAIConversationsSession, Runner, function_tool
from openai.types.shared import Reasoning

from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio
STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
ROLE_MESSAGE = (
    "Invalid value: 'tool'. Supported values are: 'assistant', 'system', 'developer', and 'user'."
)
CONTEXT_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


async def rejected(call: Awaitable[Any]) -> dict[str, Any]:
    """The error object of a 400 the openai client raised."""
    with pytest.raises(openai.BadRequestError) as raised:
        await call
    assert raised.value.status_code == 400
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"
    return body


async def post(mock: MockResponsesAPI, path: str, body: Any) -> httpx2.Response:
    async with httpx2.AsyncClient(transport=mock.transport) as http:
        return await http.post(f"{mock.base_url}{path}", json=body)


def create(mock: MockResponsesAPI, streamed: bool = False, **body: Any) -> Awaitable[Any]:
    body.setdefault("model", "gpt-4.1")
    return mock.client().responses.create(stream=streamed, **body)


def call_item(**extra: Any) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": "call_9",
        "name": "f",
        "arguments": "{}",
        **extra,
    }


def output_item(**extra: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": "call_9", "output": "ok", **extra}


# -- rejections ------------------------------------------------------------------------------


@STREAMED
async def test_an_unknown_parameter_is_rejected_and_consumes_nothing(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    mock.enqueue(Reply.text("kept"))
    mock.inject(Fault.status(500))
    error = await rejected(create(mock, streamed, input="hi", extra_body={"foo": 1}))
    assert error == {
        "message": "Unknown parameter: 'foo'.",
        "type": "invalid_request_error",
        "param": "foo",
        "code": "unknown_parameter",
    }
    assert (mock.pending_replies, mock.pending_faults, mock.response_ids) == (1, 1, [])
    assert mock.requests[-1].status == 400
    mock.clear_faults()
    answer = await create(mock, input="hi")
    assert answer.output_text == "kept"


@pytest.mark.parametrize(
    ("item", "key"),
    [
        ({"role": "assistant", "content": "x", "tool_calls": []}, "tool_calls"),
        ({"type": "message", "role": "user", "content": "x", "name": "bob"}, "name"),
        (call_item(foo=1), "foo"),
        (output_item(tool_call_id="call_9"), "tool_call_id"),
        ({"type": "reasoning", "id": "rs_1", "summary": [], "text": "x"}, "text"),
        ({"type": "item_reference", "id": "msg_1", "role": "user"}, "role"),
    ],
)
async def test_an_unknown_field_on_an_input_item_is_rejected(
    mock: MockResponsesAPI, item: dict[str, Any], key: str
) -> None:
    items = [{"role": "user", "content": "hi"}, item]
    error = await rejected(create(mock, input=items))
    assert error["param"] == f"input[1].{key}"
    assert error["code"] == "unknown_parameter"
    assert error["message"] == f"Unknown parameter: 'input[1].{key}'."
    assert mock.response_ids == []


@STREAMED
async def test_the_chat_completions_tool_role_is_rejected(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
    ]
    error = await rejected(create(mock, streamed, input=items))
    assert error == {
        "message": ROLE_MESSAGE,
        "type": "invalid_request_error",
        "param": "input[1]",
        "code": "invalid_value",
    }


async def test_an_unknown_item_type_is_rejected(mock: MockResponsesAPI) -> None:
    error = await rejected(create(mock, input=[{"type": "input_text", "text": "hi"}]))
    assert error["param"] == "input[0].type"
    assert error["code"] == "invalid_value"
    assert error["message"].startswith("Invalid value: 'input_text'. Supported values are: ")
    assert "'function_call_output'" in error["message"]


@pytest.mark.parametrize(
    ("item", "prefix"),
    [
        ({"type": "message", "id": "call_1", "role": "assistant", "content": "x"}, "msg"),
        (call_item(id="call_9"), "fc"),
        ({"type": "reasoning", "id": "item_1", "summary": []}, "rs"),
        (output_item(id="fc_1"), "fco"),
    ],
)
async def test_an_id_without_its_type_prefix_is_rejected(
    mock: MockResponsesAPI, item: dict[str, Any], prefix: str
) -> None:
    items = [{"role": "user", "content": "hi"}, item]
    error = await rejected(create(mock, input=items))
    assert error == {
        "message": f"Invalid 'input[1].id': '{item['id']}'. Expected an ID that begins with "
        f"'{prefix}'.",
        "type": "invalid_request_error",
        "param": "input[1].id",
        "code": "invalid_id_prefix",
    }


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [({"city": "Paris"}, "an object"), (None, "null"), (3, "an integer"), ([], "an array")],
)
async def test_arguments_that_are_not_a_string_are_rejected(
    mock: MockResponsesAPI, arguments: Any, kind: str
) -> None:
    items = [{"role": "user", "content": "hi"}, call_item(arguments=arguments), output_item()]
    error = await rejected(create(mock, input=items))
    assert error == {
        "message": f"Invalid type for 'input[1].arguments': expected a string, but got {kind} "
        "instead.",
        "type": "invalid_request_error",
        "param": "input[1].arguments",
        "code": "invalid_type",
    }


@pytest.mark.parametrize("model", [None, ""])
async def test_a_missing_model_is_rejected(mock: MockResponsesAPI, model: str | None) -> None:
    # The openai client will not send a create without `model`: raw HTTP.
    body: dict[str, Any] = {"input": "hi"} if model is None else {"input": "hi", "model": model}
    response = await post(mock, "/responses", body)
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "Missing required parameter: 'model'.",
            "type": "invalid_request_error",
            "param": "model",
            "code": "missing_required_parameter",
        }
    }


@STREAMED
async def test_an_input_over_the_context_window_is_rejected(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    words = "w " * 128_000  # gpt-4o: 128,000 tokens; the mock counts one word as one token
    first = await create(mock, model="gpt-4o", input=words.strip())
    assert first.usage is not None and first.usage.input_tokens == 128_000
    error = await rejected(create(mock, streamed, model="gpt-4o", input=words + "one more"))
    assert error == {
        "message": CONTEXT_MESSAGE,
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
    # A model with a larger window takes it.
    assert (await create(mock, model="gpt-4.1", input=words + "one more")).status == "completed"


async def test_the_stored_history_counts_toward_the_context_window(
    mock: MockResponsesAPI,
) -> None:
    first = await create(mock, model="o3", input="w " * 150_000)
    conversation = mock.create_conversation()
    await create(mock, model="o3", input="w " * 150_000, conversation=conversation)
    items = mock.conversation_items(conversation)
    # Each stored context holds 150,000 words of input (and the echo of them): 60,000 more
    # words pass the input alone but not the context.
    follow_up = "w " * 60_000
    for context in ({"previous_response_id": first.id}, {"conversation": conversation}):
        error = await rejected(create(mock, model="o3", input=follow_up, **context))
        assert error["code"] == "context_length_exceeded"
    assert len(mock.response_ids) == 2
    assert mock.conversation_items(conversation) == items
    assert (await create(mock, model="o3", input=follow_up)).status == "completed"


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-5", 272_000),
        ("gpt-5-nano", 272_000),
        ("o4-mini", 200_000),
        ("gpt-4o-mini", 128_000),
    ],
)
async def test_the_window_follows_the_model_family(
    mock: MockResponsesAPI, model: str, window: int
) -> None:
    error = await rejected(create(mock, model=model, input="w " * (window + 1)))
    assert error["code"] == "context_length_exceeded"


async def test_a_model_of_unknown_family_is_not_limited(mock: MockResponsesAPI) -> None:
    answer = await create(mock, model="my-fine-tune", input="w " * 1_100_000)
    assert answer.status == "completed"


async def test_conversations_endpoints_apply_the_same_rules(mock: MockResponsesAPI) -> None:
    client = mock.client()
    error = await rejected(client.conversations.create(extra_body={"name": "x"}))
    assert (error["param"], error["code"]) == ("name", "unknown_parameter")
    error = await rejected(
        client.conversations.create(items=[{"role": "tool", "content": "x"}])  # type: ignore[list-item]
    )
    assert (error["param"], error["message"]) == ("items[0]", ROLE_MESSAGE)
    conversation = await client.conversations.create()
    error = await rejected(
        client.conversations.items.create(
            conversation.id,
            items=[{"role": "user", "content": "hi"}, call_item(id="call_1")],  # type: ignore[list-item]
        )
    )
    assert error == {
        "message": "Invalid 'items[1].id': 'call_1'. Expected an ID that begins with 'fc'.",
        "type": "invalid_request_error",
        "param": "items[1].id",
        "code": "invalid_id_prefix",
    }
    error = await rejected(
        client.conversations.items.create(
            conversation.id,
            items=[call_item(foo=1)],
            extra_body={"after": "x"},  # type: ignore[list-item]
        )
    )
    assert (error["param"], error["code"]) == ("after", "unknown_parameter")
    assert mock.conversation_items(conversation.id) == []
    assert conversation.id == "conv_1"  # the rejected creates made none


async def test_compact_applies_the_same_rules(mock: MockResponsesAPI) -> None:
    client = mock.client()
    compact = client.responses.compact
    error = await rejected(compact(model="gpt-4.1", input="hi", extra_body={"store": False}))
    assert (error["param"], error["code"]) == ("store", "unknown_parameter")
    error = await rejected(
        compact(model="gpt-4.1", input=[{"role": "tool", "content": "x"}])  # type: ignore[list-item]
    )
    assert (error["param"], error["message"]) == ("input[0]", ROLE_MESSAGE)
    error = await rejected(compact(model="gpt-4.1", input=[call_item(id="call_1")]))
    assert (error["param"], error["code"]) == ("input[0].id", "invalid_id_prefix")
    error = await rejected(compact(model="gpt-4.1", input=[call_item(arguments={"a": 1})]))
    assert (error["param"], error["code"]) == ("input[0].arguments", "invalid_type")
    response = await post(mock, "/responses/compact", {"input": "hi"})
    assert (response.status_code, response.json()["error"]["param"]) == (400, "model")
    error = await rejected(compact(model="gpt-4o", input="word " * 128_001))
    assert error["message"] == CONTEXT_MESSAGE
    compacted = await compact(model="gpt-4.1", input=[{"role": "user", "content": "fine"}])
    assert compacted.output[-1].type == "compaction"


async def test_the_rules_can_be_turned_off() -> None:
    async with MockResponsesAPI(validate_requests=False) as mock:
        items = [
            {"role": "user", "content": "hi", "name": "bob"},
            {"role": "developer", "content": "x"},
        ]
        answer = await create(mock, input=items, extra_body={"foo": 1})
        assert answer.status == "completed"
        response = await post(mock, "/responses", {"input": "hi"})
        assert response.status_code == 200


# -- what the SDK sends is accepted ----------------------------------------------------------


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@STREAMED
async def test_sdk_runs_with_every_model_setting_are_accepted(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        tool_choice="auto",
        parallel_tool_calls=True,
        truncation="auto",
        max_tokens=500,
        reasoning=Reasoning(effort="low", summary="auto"),
        verbosity="low",
        metadata={"k": "v"},
        store=False,
        prompt_cache_retention="24h",
        response_include=["reasoning.encrypted_content"],
        top_logprobs=2,
    )
    agent = Agent(name="a", model=mock.model("gpt-5"), tools=[get_weather], model_settings=settings)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("done"))
    if streamed:
        streaming = Runner.run_streamed(agent, "weather?")
        async for _ in streaming.stream_events():
            pass
        result: Any = streaming
    else:
        result = await Runner.run(agent, "weather?")
    assert result.final_output == "done"
    # The second request replays the reasoning item, the call and its output (store=False).
    replayed = mock.response_requests[1]["input"]
    assert [item.get("type", "message") for item in replayed] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert [r.status for r in mock.requests] == [200, 200]


@STREAMED
async def test_sdk_server_state_and_sessions_are_accepted(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    agent = Agent(name="a", model=mock.model(), tools=[get_weather])

    async def run(text: str, **kwargs: Any) -> Any:
        if streamed:
            streaming = Runner.run_streamed(agent, text, **kwargs)
            async for _ in streaming.stream_events():
                pass
            return streaming
        return await Runner.run(agent, text, **kwargs)

    mock.enqueue(Reply.tool_call("get_weather", {"city": "Oslo"}), Reply.text("one"))
    first = await run("hi")
    mock.enqueue(Reply.text("two"))
    await run("again", previous_response_id=first.last_response_id)
    conversation = mock.create_conversation()
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Rome"}), Reply.text("three"))
    await run("in a conversation", conversation_id=conversation)
    session = OpenAIConversationsSession(openai_client=mock.client())
    mock.enqueue(Reply.text("four"), Reply.text("five"))
    await run("with a session", session=session)
    await run("and again", session=session)
    assert {r.status for r in mock.requests} == {200}
    paths = {r.path for r in mock.requests}
    assert "/responses" in paths and "/conversations" in paths
