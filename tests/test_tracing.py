"""The SDK's traces of a conversation: one trace per chat attempt, and the library's own spans.

An in-memory ``TracingProcessor`` is the only processor (nothing is exported), on a trace
provider of the test's own that is swapped back afterwards, so neither a test that turned
tracing off for the whole process nor one that installed other processors changes what is
seen here, and nothing set here outlives the test.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import Agent, RunConfig, function_tool
from agents.tracing import (
    Span,
    Trace,
    TracingProcessor,
    get_trace_provider,
    set_trace_processors,
    set_trace_provider,
    set_tracing_disabled,
    trace,
)
from agents.tracing.provider import DefaultTraceProvider
from openai import InternalServerError

from agents_state_ext import (
    ConversationState,
    InterruptedToolCallWarning,
    SQLiteStore,
    open_conversation,
)
from agents_state_ext.chat import Conversation
from agents_state_ext.testing import Fault, FixedTokenCounter, MockResponsesAPI, Reply
from agents_state_ext.types import StrategyName

pytestmark = pytest.mark.anyio
STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
STRATEGIES = pytest.mark.parametrize(
    "strategy", ["replay", "session", "previous_response", "conversation"]
)
REPAIR_SPAN = "agents_state_ext.repair"  # the documented names (docs/attempts.md, tracing)
RESEED_SPAN = "agents_state_ext.reseed"


class Collected(TracingProcessor):
    """Every trace started and every span ended, in order."""

    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self.spans: list[Span[Any]] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.traces.append(trace)

    def on_trace_end(self, trace: Trace) -> None:
        pass

    def on_span_start(self, span: Span[Any]) -> None:
        pass

    def on_span_end(self, span: Span[Any]) -> None:
        self.spans.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass

    def trace(self, trace_id: str | None) -> dict[str, Any]:
        """The one trace with this id, exported."""
        [found] = [t.export() for t in self.traces if t.trace_id == trace_id]
        assert found is not None
        return found

    def trace_exports(self) -> list[dict[str, Any] | None]:
        """Every trace started, exported, in order."""
        return [t.export() for t in self.traces]

    def spans_of(self, trace_id: str | None, kind: str | None = None) -> list[dict[str, Any]]:
        """The spans of a trace (of one ``span_data`` type), exported."""
        exported = [s.export() for s in self.spans if s.trace_id == trace_id]
        return [s for s in exported if s and (kind is None or s["span_data"]["type"] == kind)]

    def ancestors(self, span: dict[str, Any]) -> list[str]:
        """The ids of the spans ``span`` (exported) is nested in, innermost first."""
        parents = {s.span_id: s.parent_id for s in self.spans}
        found, parent = [], span["parent_id"]
        while parent is not None:
            found.append(parent)
            parent = parents.get(parent)
        return found

    def custom(self, name: str) -> list[dict[str, Any]]:
        """The custom spans called ``name``, exported."""
        return [
            s
            for s in (span.export() for span in self.spans)
            if s and s["span_data"]["type"] == "custom" and s["span_data"]["name"] == name
        ]


@pytest.fixture
def collected() -> Iterator[Collected]:
    original = get_trace_provider()
    set_trace_provider(DefaultTraceProvider())
    memory = Collected()
    set_trace_processors([memory])  # the only processor: no exporter, nothing leaves
    set_tracing_disabled(False)  # whatever another test did to the process's provider
    try:
        yield memory
    finally:
        set_trace_provider(original)


@pytest.fixture
async def store() -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(":memory:") as opened:  # records go through the stores' codec
        yield opened


async def chat_on(
    store: SQLiteStore, mock: MockResponsesAPI, strategy: StrategyName, **kwargs: Any
) -> Conversation:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    return await open_conversation(
        store, strategy=strategy, agent=agent, counter=FixedTokenCounter(), **kwargs
    )


# -- a chat attempt's trace ----------------------------------------------------------------------


@STRATEGIES
@STREAMED
async def test_each_attempt_has_its_trace_grouped_by_the_chat_and_named_by_its_record(
    collected: Collected,
    store: SQLiteStore,
    mock: MockResponsesAPI,
    strategy: StrategyName,
    streamed: bool,
) -> None:
    chat = await chat_on(store, mock, strategy)
    first = await chat.send("hi", stream=streamed)
    again = await chat.retry(stream=streamed)
    records = await chat.attempts()
    assert [r.attempt_id for r in records] == [first.attempt_id, again.attempt_id]

    assert len(collected.traces) == 2  # one per attempt: the SDK made none of its own
    for record in records:
        assert record.trace_id is not None and record.trace_id.startswith("trace_")
        exported = collected.trace(record.trace_id)
        assert exported["group_id"] == chat.id
        assert exported["metadata"] == {
            "message_id": record.message_id,
            "user_message_id": record.parent_user_id,
            "attempt_id": record.attempt_id,
            "strategy": strategy,
        }
        # The run itself (its agent and the model's response) is in that trace.
        assert collected.spans_of(record.trace_id, "agent")
        [response] = collected.spans_of(record.trace_id, "response")
        assert response["span_data"]["response_id"] == record.response_id
    assert records[0].trace_id != records[1].trace_id


@STREAMED
async def test_the_apps_group_metadata_and_workflow_are_kept(
    collected: Collected, store: SQLiteStore, mock: MockResponsesAPI, streamed: bool
) -> None:
    config = RunConfig(
        group_id="tenant-7", trace_metadata={"tenant": "7", "attempt_id": "x"}, workflow_name="w"
    )
    chat = await chat_on(store, mock, "replay", runner_kwargs={"run_config": config})
    attempt = await chat.send("hi", stream=streamed)
    record = await chat.record(attempt.id)
    exported = collected.trace(record.trace_id)
    assert (exported["workflow_name"], exported["group_id"]) == ("w", "tenant-7")
    assert exported["metadata"]["tenant"] == "7"
    assert exported["metadata"]["attempt_id"] == record.attempt_id  # the attempt's own id wins
    # The replay strategy's prompt cache grouping is the app's group, as without tracing.
    assert mock.response_requests[-1].get("prompt_cache_key")


@STREAMED
async def test_a_failed_attempts_record_names_its_trace(
    collected: Collected, store: SQLiteStore, mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await chat_on(store, mock, "previous_response")
    mock.inject(Fault.status(500))
    attempt = chat.send("hi", stream=streamed)
    with pytest.raises(InternalServerError):
        await attempt
    record = await chat.record(attempt.id)
    assert record.status == "failed"
    exported = collected.trace(record.trace_id)
    assert exported["metadata"]["attempt_id"] == record.attempt_id
    assert collected.spans_of(record.trace_id, "agent")


@STREAMED
async def test_no_trace_when_the_app_turns_tracing_off_and_the_apps_own_trace_is_used(
    collected: Collected, store: SQLiteStore, mock: MockResponsesAPI, streamed: bool
) -> None:
    off = await chat_on(
        store, mock, "replay", runner_kwargs={"run_config": RunConfig(tracing_disabled=True)}
    )
    attempt = await off.send("hi", stream=streamed)
    assert (await off.record(attempt.id)).trace_id is None
    assert collected.traces == [] and collected.spans == []

    chat = await chat_on(store, mock, "replay")
    with trace("the app's workflow") as mine:
        attempt = chat.send("hi", stream=streamed)  # its task starts inside the app's trace
    await attempt
    assert (await chat.record(attempt.id)).trace_id == mine.trace_id
    assert [t.trace_id for t in collected.traces] == [mine.trace_id]
    assert collected.spans_of(mine.trace_id, "agent")


# -- a re-seed -----------------------------------------------------------------------------------


@STREAMED
async def test_a_reseed_shows_as_a_span_around_the_second_run_in_the_attempts_trace(
    collected: Collected, store: SQLiteStore, mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await chat_on(store, mock, "previous_response")
    await chat.send("hi", stream=streamed)
    lost = chat.cursor
    mock.expire_response()
    attempt = await chat.send("again", stream=streamed)
    record = await chat.record(attempt.id)
    assert record.reseeded_from == lost

    [span] = collected.custom(RESEED_SPAN)
    assert span["trace_id"] == record.trace_id
    data = span["span_data"]["data"]
    assert data["old_cursor"] == lost
    assert data["new_cursor"] == record.response_id == record.cursor_after
    assert (data["message_id"], data["attempt_id"]) == (record.message_id, record.attempt_id)
    assert data["seeded"] == list(record.included)
    # Both runs are in the attempt's one trace: the failed one, and the re-seeded one inside
    # the span.
    runs = collected.spans_of(record.trace_id, "agent")
    assert len(runs) == 2
    assert [span["id"] in collected.ancestors(r) for r in runs] == [False, True]
    assert len([t for t in collected.traces if t.trace_id == record.trace_id]) == 1


# -- a repair ------------------------------------------------------------------------------------


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
@STREAMED
async def test_a_repair_shows_as_a_span_in_the_runs_trace(
    collected: Collected, store: SQLiteStore, mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    agent = Agent(name="a", model=mock.model(), tools=[get_weather])
    state = (
        ConversationState.previous_response()
        if strategy == "previous_response"
        else ConversationState.conversation(mock.create_conversation())
    )
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}, call_id="call_p"))
    interrupted = state.run_streamed(agent, "weather?")
    async for event in interrupted.stream_events():
        if event.type == "run_item_stream_event" and event.name == "tool_called":
            interrupted.cancel()
    assert state.tracker is not None and state.tracker.open_calls == ["call_p"]
    before = len(collected.traces)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InterruptedToolCallWarning)
        if streamed:
            result = state.run_streamed(agent, "and now?")
            async for _ in result.stream_events():
                pass
        else:
            await state.run(agent, "and now?")

    [run] = collected.traces[before:]
    [span] = collected.custom(REPAIR_SPAN)
    assert span["trace_id"] == run.trace_id
    assert span["span_data"]["data"] == {
        "call_ids": ["call_p"],
        "repairs": [{"call_id": "call_p", "closed_with": "interrupted"}],
    }
    [agent_run] = collected.spans_of(run.trace_id, "agent")
    assert agent_run["id"] in collected.ancestors(span)
    assert [(r.call_id, r.closed_with) for r in state.repairs] == [("call_p", "interrupted")]

    # A later run repairs nothing: no second span.
    await state.run(agent, "thanks")
    assert len(collected.custom(REPAIR_SPAN)) == 1


async def test_tracing_off_for_the_process_leaves_records_without_a_trace_id(
    collected: Collected, store: SQLiteStore, mock: MockResponsesAPI
) -> None:
    set_tracing_disabled(True)  # on the fixture's provider, swapped back afterwards
    chat = await chat_on(store, mock, "replay")
    attempt = await chat.send("hi")
    assert (await chat.record(attempt.id)).trace_id is None
    assert collected.traces == []


# -- an attempt that waited for tool approval -----------------------------------------------------


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


@pytest.mark.parametrize("strategy", ["replay", "previous_response"])
@STREAMED
async def test_a_resumed_attempt_goes_on_in_the_trace_its_record_names(
    collected: Collected,
    store: SQLiteStore,
    mock: MockResponsesAPI,
    strategy: StrategyName,
    streamed: bool,
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[delete_file])
    chat = await open_conversation(
        store, strategy=strategy, agent=agent, counter=FixedTokenCounter()
    )
    mock.enqueue(Reply.tool_call("delete_file", {"path": "a.txt"}), Reply.text("done"))
    waiting = await chat.send("delete a.txt", stream=streamed)
    assert waiting.status == "awaiting_approval"
    paused = await chat.record(waiting.id)
    assert paused.trace_id is not None
    await chat.approve()
    resumed = await chat.resume(stream=streamed)
    record = await chat.record(resumed.id)
    assert (record.status, record.trace_id) == ("complete", paused.trace_id)
    # Both runs, the one that paused and the one that went on, are in that trace.
    assert len(collected.spans_of(record.trace_id, "agent")) == 2
    # Resumed later (maybe in another process), the run starts that same trace again, as the
    # SDK does when it resumes a run elsewhere: the same id, group and metadata.
    first, *again = collected.trace_exports()
    assert first is not None and again == [first]
    assert (first["id"], first["group_id"]) == (record.trace_id, chat.id)
    assert first["metadata"]["attempt_id"] == record.attempt_id
