"""``Conversation.replay``: an attempt's recorded request sent again, compared on the wire.

Every strategy, streamed and not: a replay is a new sibling attempt whose request is the
recorded one byte for byte (the mock's request log shows both), or, where that cannot be (a
server conversation that moved on, an expired chain, an override), a typed reason and the
closest faithful rebuild. A chat reopened from its SQLite file, here or in another process,
replays the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelSettings, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from rich.console import Console

from agents_state_ext import InMemoryStore, SQLiteStore, open_conversation
from agents_state_ext.chat import Conversation
from agents_state_ext.cli.commands import Commands, replay_options
from agents_state_ext.stores import ConversationStore
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, MockServer

set_tracing_disabled(True)
pytestmark = pytest.mark.anyio

STRATEGIES = ["replay", "session", "previous_response", "conversation"]
EXACT = ["replay", "session", "previous_response"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def open_chat(
    mock: Any, strategy: str, agent: Agent[Any], store: ConversationStore | None = None
) -> Conversation:
    return await open_conversation(
        store or InMemoryStore(),
        strategy=strategy,  # type: ignore[arg-type]
        agent=agent,
        counter=FixedTokenCounter(10),
        client=mock.client(),
        system="Be kind.",
    )


def posts(mock: Any) -> list[Any]:
    return [r for r in mock.requests if r.method == "POST" and r.path == "/responses"]


def content(body: dict[str, Any]) -> dict[str, Any]:
    """A request body without what differs per attempt by design (none of it is content)."""
    return {k: v for k, v in body.items() if k not in ("stream",)}


def said(content: Any) -> Any:
    """A message's content as the model reads it: without the ``logprobs`` an answer carries.

    The model's own answer comes with ``logprobs: []`` on its text; the same answer sent back
    as input (a fork's seed) has none, and the model is given the same text either way.
    """
    if not isinstance(content, list):
        return content
    return [{k: v for k, v in part.items() if k != "logprobs"} for part in content]


def make_agent(mock: Any) -> Agent[Any]:
    return Agent(
        name="a",
        instructions="Be brief.",
        model=mock.model("gpt-4.1"),
        model_settings=ModelSettings(temperature=0.3),
        tools=[get_weather],
    )


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_replay_resends_the_recorded_request(strategy: str, streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        agent = make_agent(mock)
        chat = await open_chat(mock, strategy, agent)
        await chat.send("one", stream=streamed)
        original = await chat.send("two", stream=streamed)
        sent = posts(mock)[-1]
        chat.agent = agent.clone(instructions="Changed since.", model_settings=ModelSettings())
        replay = await chat.replay(original.id, stream=streamed)
        assert replay.attempt.user_id == original.user_id  # a new sibling of the original
        report = await replay.report()
        again = posts(mock)[-1]
        context = {
            r: [
                said(i.get("content"))
                for i in mock.transcript(r)
                if i.get("type", "message") == "message"
            ]
            for r in (str(report.original.response_id), str(report.replayed.response_id))
        }

    assert report.replayed.status == "complete" and report.replayed.replay_of
    assert again.headers["x-client-request-id"] == report.replayed.request_id
    assert again.headers["x-client-request-id"] != sent.headers["x-client-request-id"]
    assert again.json["instructions"] == "Be brief." and again.json["temperature"] == 0.3
    if strategy in EXACT:
        assert report.identical, report.text()
        assert content(again.json) == content(sent.json)
        assert report.obstacles == ()
        assert "identical request" in report.text()
    else:  # the server conversation holds the original's answer now: a faithful fork
        assert not report.identical
        assert [o.kind for o in report.obstacles] == ["conversation_moved"]
        assert report.differences.inputs == ["cursor_before"]
        assert again.json["conversation"] != sent.json["conversation"]
        assert {**again.json, "conversation": None} == {**sent.json, "conversation": None}
    original_context, replay_context = context.values()
    assert replay_context[:-1] == original_context[:-1]  # the same context, another answer


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_overridden_replay_is_the_ab_case(strategy: str, streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        chat = await open_chat(mock, strategy, make_agent(mock))
        original = await chat.send("one", stream=streamed)
        sent = posts(mock)[-1].json
        replay = await chat.replay(
            original.id,
            model="gpt-4o-mini",
            model_settings=ModelSettings(temperature=1.3),
            stream=streamed,
        )
        report = await replay.report()
        again = posts(mock)[-1].json

    assert (again["model"], again["temperature"]) == ("gpt-4o-mini", 1.3)
    assert (sent["model"], sent["temperature"]) == ("gpt-4.1", 0.3)
    assert again["instructions"] == sent["instructions"] and again["tools"] == sent["tools"]
    assert not report.identical
    assert report.obstacles[0].kind == "overridden"
    assert report.differences.model == ("gpt-4.1", "gpt-4o-mini")
    assert report.differences.sampling["temperature"] == (0.3, 1.3)


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_expired_chain_is_named_and_rebuilt_from_the_branch(streamed: bool) -> None:
    async with MockResponsesAPI() as mock:
        chat = await open_chat(mock, "previous_response", make_agent(mock))
        await chat.send("one", stream=streamed)
        original = await chat.send("two", stream=streamed)
        record = await chat.record(original.id)
        mock.expire_response(str(record.cursor_before))
        report = await (await chat.replay(original.id, stream=streamed)).report()
        refused, rebuilt = posts(mock)[-2:]

    assert refused.json["previous_response_id"] == record.cursor_before and refused.status != 200
    assert "previous_response_id" not in rebuilt.json
    texts = [i["content"] for i in rebuilt.json["input"] if i.get("type", "message") == "message"]
    assert len(texts) == 4  # system, one, its answer, two: the branch seeds a new chain
    assert report.replayed.status == "complete"
    assert not report.identical
    assert [o.kind for o in report.obstacles] == ["chain_expired"]
    assert report.replayed.reseeded_from == record.cursor_before


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_reopened_store_replays_the_same_request(strategy: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with MockResponsesAPI() as mock:
        store = SQLiteStore(path)
        chat = await open_chat(mock, strategy, make_agent(mock), store)
        await chat.send("one")
        original = await chat.send("two")
        sent = posts(mock)[-1].json
        await store.aclose()
        store = SQLiteStore(path)
        other = Agent(name="a", instructions="Something else.", model=mock.model("gpt-4.1"))
        other = other.clone(tools=[get_weather])
        again = await open_conversation(
            store, chat.id, agent=other, counter=FixedTokenCounter(10), client=mock.client()
        )
        report = await (await again.replay(original.id)).report()
        replayed = posts(mock)[-1].json
        await store.aclose()

    assert replayed["instructions"] == "Be brief." and replayed["temperature"] == 0.3
    assert report.identical == (strategy in EXACT), report.text()
    if strategy in EXACT:
        assert replayed == sent


REPLAY_IN_A_CHILD = """
import asyncio, json, sys
from agents import Agent, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from agents_state_ext import SQLiteStore, open_conversation
from agents_state_ext.testing import FixedTokenCounter

set_tracing_disabled(True)

@function_tool
def get_weather(city: str) -> str:
    '''The weather in a city.'''
    return f"sunny in {city}"

async def main(path, chat_id, ref, base_url):
    client = AsyncOpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    agent = Agent(name="a", model=model, tools=[get_weather])
    store = SQLiteStore(path)
    chat = await open_conversation(
        store, chat_id, agent=agent, counter=FixedTokenCounter(10), client=client
    )
    report = await (await chat.replay(ref)).report()
    await store.aclose()
    await client.close()
    print(json.dumps({"identical": report.identical, "status": report.replayed.status}))

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.parametrize("strategy", ["replay", "previous_response"])
async def test_another_process_replays_from_the_sqlite_file(strategy: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with MockServer() as server:
        client = server.client()
        store = SQLiteStore(path)
        chat = await open_conversation(
            store,
            strategy=strategy,  # type: ignore[arg-type]
            agent=make_agent_on(client),
            counter=FixedTokenCounter(10),
            client=client,
            system="Be kind.",
        )
        await chat.send("one")
        original = await chat.send("two")
        await store.aclose()
        await client.close()
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(REPLAY_IN_A_CHILD),
                *(str(path), chat.id, original.attempt_id, server.base_url),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        first, second = posts(server)[-2:]
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.strip().splitlines()[-1]) == {
        "identical": True,
        "status": "complete",
    }
    assert second.json == first.json
    assert second.headers["x-client-request-id"] != first.headers["x-client-request-id"]


def make_agent_on(client: AsyncOpenAI) -> Agent[Any]:
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    return Agent(
        name="a",
        instructions="Be brief.",
        model=model,
        model_settings=ModelSettings(temperature=0.3),
        tools=[get_weather],
    )


async def test_the_chat_command_replays_with_overrides() -> None:
    async with MockResponsesAPI() as mock:
        chat = await open_chat(mock, "replay", make_agent(mock))
        original = await chat.send("one")
        console = Console(record=True, width=200)

        async def stream(attempt: Any) -> None:
            await attempt.wait()

        async def read_line() -> str | None:
            return None

        commands = Commands(console, chat, stream, read_line)
        await commands.run(f"/replay {original.attempt_id}")
        await commands.run(f"/replay {original.attempt_id} model=gpt-4o temperature=0.9")
        out = console.export_text()
        bodies = [r.json for r in posts(mock)]

    assert out.count("identical request") == 1 and "request differs" in out
    assert "overridden: model, settings overridden" in out
    assert (bodies[2]["model"], bodies[2]["temperature"]) == ("gpt-4o", 0.9)
    assert content(bodies[1]) == content(bodies[0])  # the command streams, the send did not
    assert replay_options(["top_p=0.5"]) == (None, ModelSettings(top_p=0.5))
