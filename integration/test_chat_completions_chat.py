"""A chat whose agent speaks Chat Completions (``OpenAIChatCompletionsModel``), on the mock.

Under replay and session the library owns no server state, so the chat's actions work on any
SDK ``Model``: these tests run send (with a tool call), stop, retry, edit, the budgeted
selection and the records against the mock's ``POST /chat/completions``, streamed and not, and
read what the model saw from the request log (the endpoint stores nothing).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from agents import Agent, function_tool

from agents_state_ext import ContextIndex, TokenCounter, select_context
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._chat import open_chat, slow_reply, stop_midway
from ._support import STREAMED

CLIENT = pytest.mark.parametrize("strategy", ["replay", "session"])
CHAT = "/chat/completions"
pytestmark = pytest.mark.anyio


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def said(body: dict[str, Any]) -> list[str]:
    """``role:text`` per message, ``assistant:calls <name>`` and ``tool:<call id>``."""
    out: list[str] = []
    for message in body["messages"]:
        if message.get("tool_calls"):
            names = ",".join(c["function"]["name"] for c in message["tool_calls"])
            out.append(f"assistant:calls {names}")
        elif message["role"] == "tool":
            out.append(f"tool:{message['tool_call_id']}")
        else:
            out.append(f"{message['role']}:{message['content']}")
    return out


def agent_on(mock: MockResponsesAPI, model: str = "gpt-4.1") -> Agent[Any]:
    return Agent(name="assistant", model=mock.chat_model(model), tools=[weather])


@CLIENT
@STREAMED
async def test_send_stop_retry_edit_on_chat_completions(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy, agent=agent_on(mock))
    mock.enqueue(Reply.tool_call("weather", {"city": "Paris"}), Reply.text("sunny"))
    mock.enqueue(slow_reply(streamed=streamed), Reply.text("retold"), Reply.text("a poem"))

    first = await chat.send("weather?", stream=streamed)
    assert first.text == "sunny"
    stopped = chat.send("story", stream=streamed)
    stopped = await stop_midway(stopped, streamed=streamed, mock=mock, path=CHAT)
    assert stopped.status == "cancelled"
    assert stopped.text == ("one two " if streamed else "")  # the partial answer is kept
    retry = await chat.retry(stream=streamed)
    edit = await chat.edit(stopped.user_id, "poem", stream=streamed)
    assert (retry.text, edit.text) == ("retold", "a poem")

    turn = ["system:be brief", "user:weather?", "assistant:calls weather", "tool:call_1"]
    assert [said(b) for b in mock.chat_requests] == [
        turn[:2],
        turn,
        [*turn, "assistant:sunny", "user:story"],
        [*turn, "assistant:sunny", "user:story"],  # the cancelled partial never goes
        [*turn, "assistant:sunny", "user:poem"],  # nothing of the old version
    ]
    assert all(b["stream"] is streamed for b in mock.chat_requests if "stream" in b)
    roles = ["system", "user", "assistant", "user", "assistant"]
    assert [n.role for n in chat.active_path()] == roles
    tool_turn = [item.get("type") for item in chat.node(first.id).items]
    assert tool_turn == ["function_call", "function_call_output", "message"]
    records = await chat.attempts()
    assert [r.status for r in records] == ["complete", "cancelled", "complete", "complete"]
    assert {r.model for r in records} == {"gpt-4.1"}
    assert all(r.exact and r.state_owner == strategy for r in records)
    assert records[0].usage["requests"] == 2  # the tool step and the answer
    assert list(records[1].included) == list(records[2].included)
    assert (await chat.explain(stopped.id, retry.id)).text().endswith("nothing sent differed")


@CLIENT
@STREAMED
async def test_the_budget_drops_old_turns_from_the_messages(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy, agent=agent_on(mock), budget=12)
    mock.enqueue(Reply.text("a b c"), Reply.text("d e f"), Reply.text("g"))
    await chat.send("one two", stream=streamed)  # system 3 + user 3 + assistant 4 (words)
    await chat.send("three four", stream=streamed)
    last = await chat.send("five", stream=streamed)
    # 12 tokens: system (3) + active (2) leave 7: the newest turn (3 + 4) fits, the older not.
    assert said(mock.chat_requests[-1]) == [
        "system:be brief",
        "user:three four",
        "assistant:d e f",
        "user:five",
    ]
    record = await chat.record(last.id)
    assert record.used == 12 and len(record.included) == 4


@CLIENT
@STREAMED
async def test_a_model_tiktoken_does_not_know_is_counted_as_an_estimate(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy, agent=agent_on(mock, "llama-3.1-8b"), counter=None)
    mock.enqueue(Reply.text("hello"))
    answer = await chat.send("hi", stream=streamed)
    assert mock.chat_requests[-1]["model"] == "llama-3.1-8b"
    record = await chat.record(answer.id)
    assert record.model == "llama-3.1-8b" and record.exact is False
    estimate = TokenCounter(encoding="o200k_base", model=None)
    assert record.included == {n.id: estimate.count(n.id, n.items) for n in chat.active_path()[:2]}
    selection = select_context(
        chat.active_path()[:2], budget=100, counter=chat.counter, index=ContextIndex()
    )
    assert selection.exact is False

    own = await open_chat(mock, strategy, agent=agent_on(mock, "llama-3.1-8b"))  # counter= given
    mock.enqueue(Reply.text("hello"))
    assert (await own.record((await own.send("hi", stream=streamed)).id)).exact is True


@CLIENT
@STREAMED
async def test_a_failed_request_is_retried_with_the_same_messages(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy, agent=agent_on(mock))
    mock.enqueue(Reply.text("hello"), Reply.text("fine"))
    await chat.send("hi", stream=streamed)
    mock.inject(Fault.drop_mid_stream(2) if streamed else Fault.status(500))
    with pytest.raises(openai.APIConnectionError if streamed else openai.InternalServerError):
        await chat.send("how are you?", stream=streamed)
    answer = await chat.retry(stream=streamed)
    assert answer.text == "fine"
    failed, retried = mock.chat_requests[-2:]
    assert (
        said(failed)
        == said(retried)
        == [
            "system:be brief",
            "user:hi",
            "assistant:hello",
            "user:how are you?",
        ]
    )
    records = await chat.attempts()
    assert [r.status for r in records] == ["complete", "failed", "complete"]
