"""Attempt records say what crossed the wire, checked against the mock's request log.

One test per defect of the record (issue 15, first half), each for every strategy it applies
to, streamed and not: the effective model and settings, the instructions and tool definitions,
the prompt version after a reopen, one meaning of ``included``, statuses after an edit,
``explain`` on inputs only, and the request id sent and answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, function_tool, set_tracing_disabled
from agents.models.openai_provider import OpenAIProvider
from openai import InternalServerError
from openai.types.shared import Reasoning

from agents_state_ext import InMemoryStore, SQLiteStore, open_conversation
from agents_state_ext.chat import Conversation
from agents_state_ext.cli.render import attempts_table, graph_tree, make_console
from agents_state_ext.errors import ConcurrentUpdateError
from agents_state_ext.stores import ConversationStore
from agents_state_ext.testing import Fault, FixedTokenCounter, MockResponsesAPI

set_tracing_disabled(True)
pytestmark = pytest.mark.anyio

STRATEGIES = ["replay", "session", "previous_response", "conversation"]
SERVER = ["previous_response", "conversation"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def open_chat(
    mock: MockResponsesAPI,
    strategy: str,
    agent: Agent[Any],
    store: ConversationStore | None = None,
    **options: Any,
) -> Conversation:
    return await open_conversation(
        store or InMemoryStore(),
        options.pop("conversation_id", None),
        strategy=strategy,  # type: ignore[arg-type]
        agent=agent,
        counter=FixedTokenCounter(10),
        client=mock.client(),
        **options,
    )


def posts(mock: MockResponsesAPI) -> list[Any]:
    return [r for r in mock.requests if r.method == "POST" and r.path == "/responses"]


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


# -- 1. model and settings as sent -------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_record_holds_the_effective_model_and_settings(
    strategy: str, streamed: bool
) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(
            name="a",
            model=mock.model("gpt-4.1"),
            model_settings=ModelSettings(temperature=0.7, top_p=0.9),
        )
        config = RunConfig(
            model="gpt-4o",
            model_provider=OpenAIProvider(openai_client=mock.client(), use_responses=True),
            model_settings=ModelSettings(
                temperature=0.2,
                top_p=0.5,
                max_tokens=77,
                reasoning=Reasoning(effort="low"),
                # A real parameter ModelSettings has no field for: the mock rejects unknown ones.
                extra_body={"safety_identifier": "user-1"},
            ),
        )
        chat = await open_chat(mock, strategy, agent, runner_kwargs={"run_config": config})
        answer = await chat.send("hi", stream=streamed)
        body = posts(mock)[-1].json
        record = await chat.record(answer.id)

    assert (body["model"], body["temperature"], body["top_p"]) == ("gpt-4o", 0.2, 0.5)
    assert record.model == body["model"]
    assert record.sampling["temperature"] == body["temperature"]
    assert record.sampling["top_p"] == body["top_p"]
    assert record.sampling["max_tokens"] == body["max_output_tokens"] == 77
    assert record.sampling["reasoning"]["effort"] == body["reasoning"]["effort"] == "low"
    assert record.sampling["extra_body"] == {"safety_identifier": "user-1"}
    assert body["safety_identifier"] == "user-1"
    assert record.sampling["extra_args"]["prompt_cache_key"] == body["prompt_cache_key"]


# -- 2. instructions and tools -----------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_instructions_and_tools_are_recorded_once_and_explained(
    strategy: str, streamed: bool
) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(
            name="a",
            instructions="Be brief.",
            model=mock.model(),
            tools=[get_weather],
            model_settings=ModelSettings(tool_choice="get_weather"),
        )
        chat = await open_chat(mock, strategy, agent)
        await chat.send("one", stream=streamed)
        first = await chat.send("two", stream=streamed)
        first_body = posts(mock)[-1].json
        chat.agent = agent.clone(instructions="Answer in French.")
        second = await chat.retry(stream=streamed)
        second_body = posts(mock)[-1].json
        a, b = await chat.record(first.id), await chat.record(second.id)
        diff = await chat.explain(first.id, second.id)
        instructions = [await chat.request_part(str(r.instructions)) for r in (a, b)]
        tools = await chat.request_part(str(a.tools))
        meta = (await chat.store.get_conversation(chat.id)).meta

    assert instructions == [first_body["instructions"], second_body["instructions"]]
    assert instructions == ["Be brief.", "Answer in French."]
    assert tools == first_body["tools"] and a.tools == b.tools
    assert first_body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert a.sampling["tool_choice"] == "get_weather"  # as set: the SDK shapes it on the wire
    assert diff and diff.instructions == (a.instructions, b.instructions)
    assert diff.texts["instructions"] == ("Be brief.", "Answer in French.")
    assert "instructions" in diff.inputs and "tools" not in diff.inputs
    assert "Answer in French." in diff.text()
    # three attempts, two instructions, one tool list: each distinct part is kept once
    assert sorted(k for k in meta if k.startswith("request_part:")) == sorted(
        {f"request_part:{d}" for d in (a.instructions, b.instructions, a.tools)}
    )


# -- 3. prompt_version after a reopen ----------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_prompt_version_survives_a_reopen(strategy: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with MockResponsesAPI() as mock:
        agent = Agent(name="a", model=mock.model())
        store = SQLiteStore(path)
        chat = await open_chat(mock, strategy, agent, store, prompt_version="v7")
        await chat.send("one")
        await store.aclose()
        store = SQLiteStore(path)
        again = await open_conversation(
            store, chat.id, agent=agent, counter=FixedTokenCounter(10), client=mock.client()
        )
        await again.send("two")
        versions = [r.prompt_version for r in await again.attempts()]
        await store.aclose()
    assert again.prompt_version == "v7"
    assert versions == ["v7", "v7"]


# -- 4. one meaning of `included` --------------------------------------------------------------


def server_context(mock: MockResponsesAPI, response_id: str) -> list[str]:
    """The texts of the messages the server held for a response, its own output left out."""
    transcript = mock.transcript(response_id)
    output = {i.get("id") for i in mock.response(response_id)["output"]}
    return [text_of(i) for i in transcript if i.get("id") not in output or i.get("id") is None]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_included_is_the_context_the_model_saw(strategy: str, streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(name="a", model=mock.model())
        chat = await open_chat(mock, strategy, agent, system="Be kind.")
        await chat.send("one", stream=streamed)
        await chat.send("two", stream=streamed)
        mock.inject(Fault.status(500))
        with pytest.raises(InternalServerError):
            await chat.send("three", stream=streamed)
        failed = chat.active_path()[-1]
        retried = await chat.retry(stream=streamed)
        record = await chat.record(retried.id)
        failed_record = await chat.record(failed.id)
        context = server_context(mock, str(record.response_id))
        wire = posts(mock)[-1].json
        diff = await chat.explain(failed.id, retried.id)

    texts = [chat.node(i).text() for i in record.included]
    assert texts == ["Be kind.", "one", texts[2], "two", texts[4], "three"]
    assert context == texts  # what the server says the model saw, message for message
    if strategy in SERVER:  # the server held the chain: only what it lacked was sent
        sent_texts = [text_of(i) for i in wire["input"]]
        assert [chat.node(i).text() for i in (record.sent or [])] == sent_texts
        assert len(sent_texts) < len(texts)
    else:
        assert record.sent == list(record.included)
        assert [text_of(i) for i in wire["input"]] == texts
    assert record.used == sum(record.included.values())
    # the failed attempt and its retry had the same context: nothing to explain there
    assert list(failed_record.included) == list(record.included)
    assert not (diff.added or diff.removed or diff.retokenized)


# -- 5. statuses after an edit -----------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_edit_keeps_final_statuses_and_adds_the_invalidation(
    strategy: str, streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Wide enough that the whole ids leave the status column on one line (at 120 it wraps).
    monkeypatch.setenv("COLUMNS", "300")
    async with MockResponsesAPI() as mock:
        agent = Agent(name="a", model=mock.model())
        chat = await open_chat(mock, strategy, agent)
        first = await chat.send("one", stream=streamed)
        second = await chat.send("two", stream=streamed)
        edited = await chat.edit(first.user_id, "uno", stream=streamed)
        records = {r.message_id: r for r in await chat.attempts()}
        table = make_console()
        with table.capture() as captured:
            table.print(attempts_table(list(records.values())))
            table.print(graph_tree(chat.graph, "chat"))
        out = captured.get()

    for old in (first, second):
        assert chat.node(old.id).status == "invalid"
        record = records[old.id]
        assert record.status == "complete"  # the final status is kept
        assert record.invalidated_by == edited.user_id and record.invalidated_at is not None
    assert records[edited.id].invalidated_by is None
    assert out.count("complete · invalid (edit") == 2
    assert "(was complete, edited away by" in out


# -- 6. explain compares inputs only -----------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_explain_a_retry_pair_and_an_edit_pair(strategy: str, streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(name="a", model=mock.model())
        chat = await open_chat(mock, strategy, agent)
        await chat.send("one", stream=streamed)
        first = await chat.send("two", stream=streamed)
        again = await chat.retry(stream=streamed)
        retry_diff = await chat.explain(first.id, again.id)
        edited = await chat.edit(first.user_id, "TWO?", stream=streamed)
        edit_diff = await chat.explain(first.id, edited.id)
        a, b = await chat.record(first.id), await chat.record(again.id)

    if strategy == "conversation":  # the retry forked: its cursor before is another conversation
        assert retry_diff.inputs == ["cursor_before"]
    else:
        assert not retry_diff, retry_diff.text()
        assert "identical request" in retry_diff.text()
    if strategy in SERVER:
        assert a.cursor_after != b.cursor_after  # an output: never reported
    assert "cursor_after" not in retry_diff.text()
    assert edit_diff.texts["prompt"] == ("two", "TWO?")
    assert "prompt: 'two' -> 'TWO?'" in edit_diff.text()


# -- 7. the request id crosses the wire ---------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_request_id_goes_out_and_the_servers_comes_back(
    strategy: str, streamed: bool
) -> None:
    async with MockResponsesAPI() as mock:
        agent = Agent(
            name="a",
            model=mock.model(),
            model_settings=ModelSettings(extra_headers={"X-Trace": "t-1"}),
        )
        chat = await open_chat(mock, strategy, agent)
        answers = [await chat.send(text, stream=streamed) for text in ("one", "two")]
        records = [await chat.record(a.id) for a in answers]
        requests = posts(mock)[-2:]

    for record, request in zip(records, requests, strict=True):
        assert record.request_id is not None
        assert request.headers["x-client-request-id"] == record.request_id
        assert request.headers["x-trace"] == "t-1"  # the app's own headers stay
        assert record.server_request_id == request.request_id is not None
        assert record.sampling["extra_headers"] == {"X-Trace": "t-1"}
    assert records[0].request_id != records[1].request_id


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_edit_on_another_handle_marks_the_running_attempts_record(
    streamed: bool, tmp_path: Path
) -> None:
    path = tmp_path / "chat.db"
    async with MockResponsesAPI() as mock:
        agent = Agent(name="a", model=mock.model())
        async with SQLiteStore(path) as one_store, SQLiteStore(path) as two_store:
            one = await open_chat(mock, "replay", agent, one_store)
            await one.send("hi")
            held, release = asyncio.Event(), asyncio.Event()

            async def hold(request: Any, sent: int) -> None:
                held.set()
                await release.wait()

            mock.frame_hook = hold
            story = one.send("story", stream=streamed)
            await held.wait()
            two = await open_conversation(
                two_store, one.id, agent=agent, counter=FixedTokenCounter(10)
            )
            mock.frame_hook = None
            edited = two.edit(story.user_id, "poem")
            await edited.started()
            release.set()
            with pytest.raises(ConcurrentUpdateError):
                await story
            await edited
            record = await two.record(story.attempt_id)
    assert record.status == "complete"
    assert record.invalidated_by == edited.user_id and record.invalidated_at is not None
