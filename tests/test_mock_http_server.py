"""MockServer: the stateful mock served over a real socket by its own process.

One server process serves the module (reset before each test); the lifecycle tests start
their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _grammar import message, through
from _grammar import stream as stream_of
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from agents_state_ext.testing import (
    Fault,
    MockServer,
    MockServerError,
    Reply,
    ResponseContext,
    Usage,
    describe_items,
)

set_tracing_disabled(True)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[MockServer]:
    with MockServer() as running:
        yield running


@pytest.fixture
def server(shared_server: MockServer) -> MockServer:
    shared_server.reset()
    return shared_server


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def shouting_reply(context: ResponseContext) -> Reply:
    """A responder the server imports by name (``test_mock_http_server:shouting_reply``)."""
    return Reply.text((context.last_user_text or "").upper())


def agent_on(client: AsyncOpenAI, **kwargs: Any) -> Agent[Any]:
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    return Agent(name="assistant", model=model, **kwargs)


async def run(agent: Agent[Any], text: str, streamed: bool, **kwargs: Any) -> Any:
    """A run, streamed or not; a streamed one also returns the text deltas it saw."""
    if not streamed:
        return await Runner.run(agent, text, **kwargs), []
    result = Runner.run_streamed(agent, text, **kwargs)
    deltas = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
    return result, deltas


# -- the API over the socket ------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_agent_runs_over_the_socket(server: MockServer, streamed: bool) -> None:
    server.enqueue(Reply.text("Hello there, friend!", chunks=["Hello ", "there, ", "friend!"]))
    async with server.client() as client:
        result, deltas = await run(agent_on(client), "hi", streamed)
    assert result.final_output == "Hello there, friend!"
    assert deltas == (["Hello ", "there, ", "friend!"] if streamed else [])
    [request] = server.requests
    assert (request.method, request.path, request.status) == ("POST", "/responses", 200)
    assert (request.streamed, request.json.get("stream", False)) == (streamed, streamed)
    assert server.response_ids == [result.last_response_id] == [request.response_id]
    transcript = server.transcript(result.last_response_id)
    assert describe_items(transcript) == ["user: hi", "assistant: Hello there, friend!"]
    if streamed:
        assert request.events[0] == "response.created"
        assert request.events.count("response.output_text.delta") == 3
        assert request.events[-1] == "response.completed"


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_tool_calls_and_previous_response_id_chaining(
    server: MockServer, streamed: bool
) -> None:
    server.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("It is sunny."))
    async with server.client() as client:
        agent = agent_on(client, tools=[get_weather])
        first, _ = await run(agent, "weather?", streamed, auto_previous_response_id=True)
        second, _ = await run(
            agent, "and tomorrow?", streamed, previous_response_id=first.last_response_id
        )
    assert (first.final_output, second.final_output) == ("It is sunny.", "echo: and tomorrow?")
    # Each request sent only what is new; the server-side context holds everything once.
    sent = [body.get("previous_response_id") for body in server.response_requests]
    assert sent == [None, "resp_1", "resp_2"]
    assert [describe_items(body["input"]) for body in server.response_requests[1:]] == [
        ["function_call_output [call_1]: sunny in Paris"],
        ["user: and tomorrow?"],
    ]
    assert describe_items(server.transcript(second.last_response_id)) == [
        "user: weather?",
        'function_call get_weather {"city": "Paris"} [call_1]',
        "function_call_output [call_1]: sunny in Paris",
        "assistant: It is sunny.",
        "user: and tomorrow?",
        "assistant: echo: and tomorrow?",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_chat_completions_model_over_the_socket(server: MockServer, streamed: bool) -> None:
    server.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("It is sunny."))
    async with server.client() as client:
        model = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
        agent = Agent(name="assistant", model=model, tools=[get_weather])
        result, _ = await run(agent, "weather?", streamed)
    assert result.final_output == "It is sunny."
    said = [[m["role"] for m in body["messages"]] for body in server.chat_requests]
    assert said == [["user"], ["user", "assistant", "tool"]]
    assert [r.streamed for r in server.requests] == [streamed, streamed]
    assert server.response_ids == []  # chat completions store nothing


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_conversation_over_the_socket(server: MockServer, streamed: bool) -> None:
    async with server.client() as client:
        conversation = await client.conversations.create(items=[])
        agent = agent_on(client)
        await run(agent, "one", streamed, conversation_id=conversation.id)
        await run(agent, "two", streamed, conversation_id=conversation.id)
        listed = await client.conversations.items.list(conversation.id, order="asc")
    items = server.conversation_items(conversation.id)
    assert describe_items(items) == [
        "user: one",
        "assistant: echo: one",
        "user: two",
        "assistant: echo: two",
    ]
    assert [item.id for item in listed.data] == [item["id"] for item in items]
    assert server.create_conversation([{"role": "user", "content": "seeded"}]) == "conv_2"
    assert describe_items(server.conversation_items("conv_2")) == ["user: seeded"]


async def rules_and_lock(client: AsyncOpenAI) -> list[str]:
    """An unknown parameter, then a second request on a conversation with a stream in flight:
    the status or error code of each."""
    conversation = await client.conversations.create()
    stream = await client.responses.create(
        model="gpt-4.1", input="a b c", conversation=conversation.id, stream=True
    )
    answers: list[str] = []
    for extra in ({"extra_body": {"foo": 1}}, {"conversation": conversation.id}):
        try:
            answers.append(
                (await client.responses.create(model="gpt-4.1", input="x", **extra)).status or ""
            )
        except openai.BadRequestError as error:
            assert isinstance(error.body, dict)
            answers.append(error.body["code"])
    await stream.close()
    return answers


@pytest.mark.anyio
async def test_request_rules_and_the_conversation_lock_can_be_turned_off(
    server: MockServer,
) -> None:
    """``validate_requests`` and ``lock_conversations`` reach the server (on by default)."""
    server.enqueue(Reply.text("a b c", delay=0.2))
    async with server.client() as client:
        assert await rules_and_lock(client) == ["unknown_parameter", "conversation_locked"]
    loose = MockServer(validate_requests=False, lock_conversations=False)
    async with loose, loose.client() as client:
        loose.enqueue(Reply.text("a b c", delay=0.2))
        assert await rules_and_lock(client) == ["completed", "completed"]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault.status(500), openai.InternalServerError),
        (Fault.rate_limit(retry_after=2), openai.RateLimitError),
        (Fault.connect_error(), openai.APIConnectionError),
        (Fault.timeout(), openai.APITimeoutError),
    ],
)
async def test_a_fault_reaches_the_client_over_the_socket(
    server: MockServer, streamed: bool, fault: Fault, error: type[Exception]
) -> None:
    server.enqueue(Reply.text("kept"))
    server.inject(fault)
    async with server.client() as client:
        # An injected timeout holds the request until the client gives up: a short timeout.
        impatient = client.with_options(timeout=1.0)
        with pytest.raises(error) as raised:
            stream = await impatient.responses.create(model="gpt-4.1", input="a", stream=streamed)
            if streamed:
                async for _ in stream:
                    pass
        if fault.kind == "status":
            assert isinstance(raised.value, openai.APIStatusError)
            assert raised.value.body == {
                "message": fault.message,
                "type": fault.resolved_error_type(),
                "param": None,
                "code": fault.error_code,
            }
            assert raised.value.response.headers.get("retry-after") == (
                "2" if fault.status_code == 429 else None
            )
        assert server.response_ids == []
        assert server.pending_replies == 1
        retried = await client.responses.create(model="gpt-4.1", input="a")
    assert retried.output_text == "kept"
    assert [r.fault for r in server.requests] == [fault, None]


@pytest.mark.anyio
async def test_a_drop_mid_stream_closes_the_connection(server: MockServer) -> None:
    server.enqueue(Reply.text("one two three"))
    expected = stream_of(message(3))
    server.inject(Fault.drop_mid_stream(through(expected, "response.output_text.delta")))
    seen: list[str] = []
    async with server.client() as client:
        with pytest.raises(openai.APIConnectionError):
            stream = await client.responses.create(model="gpt-4.1", input="a", stream=True)
            async for event in stream:
                seen.append(event.type)
        assert seen == expected[: expected.index("response.output_text.delta") + 1]
        assert server.requests[0].events == seen
        assert (server.response_ids, server.pending_replies) == ([], 1)
        again = await client.responses.create(model="gpt-4.1", input="a")
    assert again.output_text == "one two three"


@pytest.mark.anyio
async def test_a_drop_with_commit_stores_what_the_client_never_heard(server: MockServer) -> None:
    server.inject(Fault.drop_mid_stream(0, commit=True))
    async with server.client() as client:
        with pytest.raises(openai.APIConnectionError):
            await client.responses.create(model="gpt-4.1", input="lost")
    assert server.response_ids == ["resp_1"]
    assert describe_items(server.transcript("resp_1")) == ["user: lost", "assistant: echo: lost"]


# -- admin calls ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_admin_reads_and_scripts_the_state(server: MockServer) -> None:
    faults = [Fault.status(503, "overloaded"), Fault.rate_limit(retry_after=1)]
    server.inject(faults[0])
    server.inject(faults[1], times=2)
    assert server.pending_faults == 3
    assert server.clear_faults() == [faults[0], faults[1], faults[1]]
    reply = Reply.text("a b", chunks=["a ", "b"], usage=Usage(3, 2)) + Reply.tool_calls(
        [("f", {"x": 1}), ("g", "{}")]
    )
    server.enqueue(reply)
    async with server.client() as client:
        response = await client.responses.create(model="gpt-4.1", input="hi")
        assert response.usage is not None and response.usage.input_tokens == 3
        assert [item.type for item in response.output] == ["message"] + ["function_call"] * 2
        stored = server.response(response.id)["output"]
        assert [item["id"] for item in stored] == [item.id for item in response.output]
        assert server.expire_response(response.id) == [response.id]
        with pytest.raises(openai.BadRequestError, match="not found"):
            await client.responses.create(
                model="gpt-4.1", input="more", previous_response_id=response.id
            )
    [first, second] = server.requests
    assert (first.json["input"], first.status, first.error) == ("hi", 200, None)
    assert second.status == 400 and second.error is not None
    with pytest.raises(KeyError):
        server.transcript(response.id)
    with pytest.raises(KeyError):
        server.conversation_items("conv_unknown")
    server.reset()
    assert (server.requests, server.response_ids, server.pending_replies) == ([], [], 0)


@pytest.mark.anyio
async def test_a_responder_by_name_is_imported_by_the_server(server: MockServer) -> None:
    server.set_responder(f"{__name__}:shouting_reply")
    async with server.client() as client:
        shouted = await client.responses.create(model="gpt-4.1", input="quiet please")
        server.reset()  # the server's own responder (the echo) comes back
        echoed = await client.responses.create(model="gpt-4.1", input="quiet please")
    assert (shouted.output_text, echoed.output_text) == ("QUIET PLEASE", "echo: quiet please")
    server.set_responder(echo_delay=0.01)  # the echo, one word per streamed frame
    async with server.client() as client:
        _, deltas = await run(agent_on(client), "one two three", streamed=True)
    assert deltas == ["echo: ", "one ", "two ", "three"]
    with pytest.raises(MockServerError, match="400"):
        server.set_responder("no_such_module_anywhere:reply")


def test_replies_and_faults_survive_the_wire_format() -> None:
    reply = (
        Reply.text("x y", chunks=["x ", "y"], delay=0.5) + Reply.tool_call("f", "{}")
    ).as_incomplete()
    assert Reply.from_dict(json.loads(json.dumps(reply.to_dict()))) == reply
    fault = Fault.rate_limit(retry_after=3, commit=True)
    assert Fault.from_dict(json.loads(json.dumps(fault.to_dict()))) == fault
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault.from_dict({"kind": "meteor"})


# -- several clients --------------------------------------------------------------------------

CLIENT = """
import asyncio, sys
from agents import Agent, Runner, set_tracing_disabled
set_tracing_disabled(True)
result = asyncio.run(Runner.run(Agent(name="a", model="gpt-4.1"), sys.argv[1]))
print(result.last_response_id, result.final_output)
"""


@pytest.mark.anyio
async def test_a_client_process_and_a_local_client_share_one_server(server: MockServer) -> None:
    # The other process reaches it as the CLI does: the SDK's default client, configured by
    # the environment only.
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
    env["PYTHONPATH"] = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
    command = [sys.executable, "-c", CLIENT, "from afar"]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as other:
        async with server.client() as client:
            local, _ = await run(agent_on(client), "from here", streamed=True)
        remote_id, remote_answer = other.communicate(timeout=120)[0].strip().split(" ", 1)
    assert other.returncode == 0
    assert (local.final_output, remote_answer) == ("echo: from here", "echo: from afar")
    assert sorted(server.response_ids) == sorted([local.last_response_id, remote_id])
    assert describe_items(server.transcript(remote_id)) == [
        "user: from afar",
        "assistant: echo: from afar",
    ]
    assert describe_items(server.transcript(local.last_response_id)) == [
        "user: from here",
        "assistant: echo: from here",
    ]


# -- lifecycle --------------------------------------------------------------------------------


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.anyio
async def test_a_client_leaving_mid_stream_is_seen_and_stop_leaves_no_process(
    server: MockServer,
) -> None:
    async with MockServer(store_interrupted_streams=True) as other:
        pid = other.pid
        assert other.base_url.startswith("http://127.0.0.1:") and other.base_url.endswith("/v1")
        assert other.port not in (0, server.port)
        words = [f"w{i} " for i in range(40)]
        other.enqueue(Reply.text("".join(words), chunks=words, delay=1.0))
        async with other.client() as client:
            stream = await client.responses.create(model="gpt-4.1", input="a", stream=True)
            async for event in stream:
                if event.type == "response.output_text.delta":
                    break
            await stream.close()
        # Stored as interrupted (the flag): the server saw the client leave, long before the
        # 40 s the whole stream would take.
        deadline = time.monotonic() + 20
        while not other.response_ids and time.monotonic() < deadline:
            time.sleep(0.05)
        assert other.response_ids == ["resp_1"]
        assert "response.completed" not in other.requests[0].events
    assert gone(pid)  # a zombie would still take the signal 0
    with pytest.raises(RuntimeError, match="not started"):
        other.base_url  # noqa: B018


def test_a_crash_is_reported_with_the_exit_code() -> None:
    server = MockServer()
    server.start()
    pid = server.pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(MockServerError, match=f"exited with code -{signal.SIGKILL}"):
        for _ in range(100):  # until the kill has landed
            server.reset()
            time.sleep(0.05)
    with pytest.raises(MockServerError, match="had exited"):
        server.stop()
    assert gone(pid)


def test_a_server_that_cannot_start_says_why(server: MockServer) -> None:
    with pytest.raises(MockServerError, match=r"(?i)address already in use"):
        MockServer(port=server.port).start()
