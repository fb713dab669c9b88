"""MockResponsesAPI: the request log's statuses, errors and SSE events; the frame hook; faults."""

from __future__ import annotations

import openai
import pytest
from _grammar import message, through
from _grammar import stream as stream_of
from agents import set_tracing_disabled

from agents_state_ext.testing import Fault, MockResponsesAPI, RecordedRequest, Reply

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

TEXT_EVENTS = stream_of(message(2))
ITEM_ADDED = through(TEXT_EVENTS, "response.output_item.added")
FIRST_DELTA = through(TEXT_EVENTS, "response.output_text.delta")


async def stream(mock: MockResponsesAPI, **kwargs: object) -> list[str]:
    events = await mock.client().responses.create(model="gpt-4.1", stream=True, **kwargs)  # type: ignore[call-overload]
    return [event.type async for event in events]


async def test_each_request_records_its_status_error_and_events(mock: MockResponsesAPI) -> None:
    mock.enqueue(Reply.text("one two", chunks=["one ", "two"]))
    assert await stream(mock, input="hi") == TEXT_EVENTS
    with pytest.raises(openai.BadRequestError):
        await mock.client().responses.create(model="gpt-4.1", input="x", previous_response_id="r")
    mock.inject(Fault.status(503, "overloaded"))
    with pytest.raises(openai.InternalServerError):
        await mock.client().responses.create(model="gpt-4.1", input="x")
    ok, rejected, faulted = mock.requests
    assert (ok.status, ok.error, ok.events) == (200, None, TEXT_EVENTS)
    assert rejected.status == 400 and rejected.fault is None
    assert rejected.error == "Previous response with id 'r' not found."
    assert (faulted.status, faulted.error, faulted.events) == (503, "overloaded", [])


async def test_a_drop_mid_stream_logs_only_the_events_sent(mock: MockResponsesAPI) -> None:
    mock.inject(Fault.drop_mid_stream(ITEM_ADDED))
    with pytest.raises(openai.APIConnectionError):
        await stream(mock, input="hi")
    assert mock.requests[0].events == TEXT_EVENTS[:ITEM_ADDED]


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_frame_hook_runs_at_every_point_of_an_answer_in_flight(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    seen: list[tuple[str | None, int, int]] = []

    async def hook(record: RecordedRequest, sent: int) -> None:
        # Nothing is stored before the last frame: the response is still in flight.
        seen.append((record.response_id, sent, len(mock.response_ids)))

    mock.frame_hook = hook
    mock.enqueue(Reply.text("one two", chunks=["one ", "two"]))
    if streamed:
        await stream(mock, input="hi")
        stored_from = len(TEXT_EVENTS)
        assert [s for _, s, _ in seen] == list(range(len(TEXT_EVENTS) + 1))
    else:
        await mock.client().responses.create(model="gpt-4.1", input="hi")
        stored_from = 1
        assert [s for _, s, _ in seen] == [0]
    assert {r for r, _, _ in seen} == {"resp_1"}
    assert [stored for _, s, stored in seen if s < stored_from] == [0] * stored_from


async def test_a_cancel_from_the_frame_hook_stores_nothing(mock: MockResponsesAPI) -> None:
    async def hook(record: RecordedRequest, sent: int) -> None:
        if sent == FIRST_DELTA:
            raise RuntimeError("stop here")

    mock.frame_hook = hook
    with pytest.raises(RuntimeError, match="stop here"):
        await stream(mock, input="hi")
    assert mock.response_ids == [] and mock.requests[0].events == TEXT_EVENTS[:FIRST_DELTA]


async def test_clear_faults_returns_and_drops_the_unused_ones(mock: MockResponsesAPI) -> None:
    mock.inject(Fault.status(500), times=2)
    assert mock.clear_faults() == [Fault.status(500)] * 2
    assert mock.pending_faults == 0 and mock.clear_faults() == []
    await mock.client().responses.create(model="gpt-4.1", input="fine")
    assert mock.requests[0].status == 200
