"""MockResponsesAPI: injected faults, commit semantics and compaction."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest
from _grammar import message, stream, through
from agents import set_tracing_disabled

from agents_state_ext.testing import (
    Fault,
    MockResponsesAPI,
    Reply,
    decode_compaction,
    describe_items,
)

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)


async def create(mock: MockResponsesAPI, streamed: bool, **kwargs: Any) -> list[str]:
    """One request through the openai client; the event types seen when streamed."""
    client = mock.client()
    if not streamed:
        await client.responses.create(model="gpt-4.1", **kwargs)
        return []
    seen: list[str] = []
    stream = await client.responses.create(model="gpt-4.1", stream=True, **kwargs)
    async for event in stream:
        seen.append(event.type)
    return seen


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault.status(500), openai.InternalServerError),
        (Fault.status(503, "overloaded"), openai.InternalServerError),
        (Fault.status(400, "bad"), openai.BadRequestError),
        (Fault.rate_limit(retry_after=1), openai.RateLimitError),
        (Fault.timeout(), openai.APITimeoutError),
        (Fault.connect_error(), openai.APIConnectionError),
    ],
)
async def test_faults_without_commit_store_nothing(
    mock: MockResponsesAPI, streamed: bool, fault: Fault, error: type[Exception]
) -> None:
    conversation_id = mock.create_conversation()
    mock.enqueue(Reply.text("kept"))
    mock.inject(fault)
    with pytest.raises(error):
        await create(mock, streamed, input="a", conversation=conversation_id)
    assert mock.response_ids == []
    assert mock.conversation_items(conversation_id) == []
    assert mock.pending_replies == 1
    assert mock.requests[0].fault == fault
    expected_status = fault.status_code if fault.kind == "status" else None
    assert mock.requests[0].status == expected_status
    await create(mock, streamed, input="a", conversation=conversation_id)
    assert describe_items(mock.conversation_items(conversation_id)) == [
        "user: a",
        "assistant: kept",
    ]


@pytest.mark.parametrize(("retry_after", "header"), [(2, "2"), (2.0, "2"), (0.2, "1"), (1.5, "2")])
async def test_retry_after_is_whole_seconds(
    mock: MockResponsesAPI, retry_after: float, header: str
) -> None:
    mock.inject(Fault.rate_limit(retry_after=retry_after))
    with pytest.raises(openai.RateLimitError) as info:
        await mock.client().responses.create(model="gpt-4.1", input="a")
    assert info.value.response.headers["retry-after"] == header
    assert mock.requests[0].status == 429


def test_a_negative_retry_after_is_refused() -> None:
    with pytest.raises(ValueError, match="retry_after"):
        Fault.rate_limit(retry_after=-1)


async def test_status_fault_body_and_headers(mock: MockResponsesAPI) -> None:
    mock.inject(Fault.rate_limit(retry_after=2))
    with pytest.raises(openai.RateLimitError) as info:
        await mock.client().responses.create(model="gpt-4.1", input="a")
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.body == {
        "message": "Rate limit reached. Please try again later.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    mock.inject(Fault.status(502, headers={"x-debug": "1"}))
    with pytest.raises(openai.InternalServerError) as server_error:
        await mock.client().responses.create(model="gpt-4.1", input="a")
    assert isinstance(server_error.value.body, dict)
    assert server_error.value.body["type"] == "server_error"
    assert server_error.value.response.headers["x-debug"] == "1"


@pytest.mark.parametrize("streamed", [False, True])
async def test_conversation_locked_fault_is_the_real_body_and_stores_nothing(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    conversation = mock.create_conversation()
    mock.inject(Fault.conversation_locked())
    with pytest.raises(openai.BadRequestError) as info:
        await mock.client().responses.create(
            model="gpt-4.1", input="a", conversation=conversation, stream=streamed
        )
    assert info.value.body == {
        "message": "Another process is currently operating on this conversation. Please retry "
        "in a few seconds.",
        "type": "invalid_request_error",
        "param": "conversation",
        "code": "conversation_locked",
    }
    assert mock.conversation_items(conversation) == [] and mock.response_ids == []


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(500, commit=True),
        Fault.timeout(commit=True),
        Fault.drop_mid_stream(2, commit=True),
    ],
)
async def test_commit_faults_store_before_failing(
    mock: MockResponsesAPI, streamed: bool, fault: Fault
) -> None:
    conversation_id = mock.create_conversation()
    mock.enqueue(Reply.text("heard?"), Reply.text("next"))
    mock.inject(fault)
    with pytest.raises(openai.APIError):
        await create(mock, streamed, input="a", conversation=conversation_id)
    assert mock.response_ids == ["resp_1"]
    assert mock.requests[0].response_id == "resp_1"
    assert mock.pending_replies == 1
    # The server has the turn: resending the same input now duplicates it.
    await create(mock, streamed, input="a", conversation=conversation_id)
    assert describe_items(mock.conversation_items(conversation_id)) == [
        "user: a",
        "assistant: heard?",
        "user: a",
        "assistant: next",
    ]


async def test_drop_mid_stream_after_n_events(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("one two three"))
    expected = stream(message(3))
    first_delta = through(expected, "response.output_text.delta")
    mock.inject(Fault.drop_mid_stream(first_delta))
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        seen = await create_collecting(mock, seen)
    assert seen == expected[:first_delta] and seen[-1] == "response.output_text.delta"
    assert mock.response_ids == []
    assert mock.pending_replies == 1
    assert mock.requests[0].status == 200


async def create_collecting(mock: MockResponsesAPI, seen: list[str]) -> list[str]:
    stream = await mock.client().responses.create(model="gpt-4.1", input="a", stream=True)
    async for event in stream:
        seen.append(event.type)
    return seen


async def test_drop_after_completion_is_stored(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("done"))
    mock.inject(Fault.drop_mid_stream(100))
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        await create_collecting(mock, seen)
    assert seen[-1] == "response.completed"
    assert mock.response_ids == ["resp_1"]
    assert mock.pending_replies == 0


async def test_non_streamed_drop_without_commit(mock: MockResponsesAPI) -> None:
    mock.inject(Fault.drop_mid_stream(0))
    with pytest.raises(openai.APIConnectionError):
        await mock.client().responses.create(model="gpt-4.1", input="a")
    assert mock.response_ids == []
    assert mock.requests[0].status is None


async def test_rejection_wins_over_a_processing_fault(mock: MockResponsesAPI) -> None:
    mock.inject(Fault.status(500, commit=True))
    with pytest.raises(openai.BadRequestError, match="Previous response"):
        await mock.client().responses.create(
            model="gpt-4.1", input="a", previous_response_id="resp_x"
        )
    assert mock.pending_faults == 0


async def test_delay_and_times(mock: MockResponsesAPI) -> None:
    mock.inject(Fault.delay(0.05))
    started = time.monotonic()
    response = await mock.client().responses.create(model="gpt-4.1", input="a")
    assert response.output_text == "echo: a"
    assert time.monotonic() - started >= 0.05
    mock.inject(Fault.status(500), times=2)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await mock.client().responses.create(model="gpt-4.1", input="a")
    assert mock.pending_faults == 0
    assert (await mock.client().responses.create(model="gpt-4.1", input="b")).output_text == (
        "echo: b"
    )


async def test_client_retries_through_faults(mock: MockResponsesAPI) -> None:
    client = mock.client(max_retries=2)
    mock.inject(Fault.status(500, headers={"retry-after-ms": "1"}), times=2)
    response = await client.with_options(timeout=5).responses.create(model="gpt-4.1", input="a")
    assert response.output_text == "echo: a"
    assert [r.status for r in mock.requests] == [500, 500, 200]


async def test_compact(mock: MockResponsesAPI) -> None:
    client = mock.client()
    first = await client.responses.create(model="gpt-4.1", input="a")
    compacted = await client.responses.compact(
        model="gpt-4.1", previous_response_id=first.id, input="b"
    )
    assert compacted.object == "response.compaction"
    output = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    assert [item["type"] for item in output] == ["message", "message", "compaction"]
    assert [item["id"] for item in output] == ["msg_1", "msg_3", "cmp_1"]
    assert describe_items(decode_compaction(output[-1]["encrypted_content"])) == [
        "user: a",
        "assistant: echo: a",
        "user: b",
    ]
    window: list[Any] = [*output, {"role": "user", "content": "c"}]
    follow_up = await client.responses.create(model="gpt-4.1", input=window, store=False)
    assert follow_up.output_text == "echo: c"
