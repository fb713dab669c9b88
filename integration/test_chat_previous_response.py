"""The chat API under previous_response: every branch chains from its own response id."""

from __future__ import annotations

import pytest

from agents_state_ext import ContextOverflowError
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._chat import open_chat, slow_reply, stop_midway
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

BASE = ["system:be brief", "user:hi", "assistant:hello"]


@STREAMED
async def test_retry_edit_and_switch_fork_the_server_chain_per_branch(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "previous_response")
    mock.enqueue(Reply.text("hello"), slow_reply(streamed=streamed))
    mock.enqueue(Reply.text("retold"), Reply.text("sequel"), Reply.text("poem"), Reply.text("bye"))

    first = await chat.send("hi", stream=streamed)
    stopped = await stop_midway(chat.send("story", stream=streamed), streamed=streamed, mock=mock)
    assert stopped.status == "cancelled"
    retry = await chat.retry(stream=streamed)
    sequel = await chat.send("sequel?", stream=streamed)
    edit = await chat.edit(stopped.user_id, "poem", stream=streamed)
    await chat.switch(first.id)
    assert chat.cursor == (await chat.record(first.id)).response_id
    thanks = await chat.send("thanks", stream=streamed)

    r = {a.id: (await chat.record(a.id)) for a in (first, stopped, retry, sequel, edit, thanks)}
    hello = r[first.id].response_id
    assert hello is not None
    # Only the new user message goes, chained from the nearest complete answer on its branch;
    # the cancelled attempt is never chained from.
    assert [wire(b) for b in mock.response_requests] == [
        (None, None, ["system:be brief", "user:hi"]),
        (hello, None, ["user:story"]),
        (hello, None, ["user:story"]),
        (r[retry.id].response_id, None, ["user:sequel?"]),
        (hello, None, ["user:poem"]),
        (hello, None, ["user:thanks"]),
    ]
    assert r[stopped.id].cursor_before == r[stopped.id].cursor_after == hello
    assert (r[edit.id].cursor_before, r[edit.id].cursor_after) == (
        hello,
        edit.node.meta["response_id"],
    )
    assert texts(mock.transcript(str(r[retry.id].response_id))) == [
        *BASE,
        "user:story",
        "assistant:retold",
    ]
    assert texts(mock.transcript(str(r[sequel.id].response_id))) == [
        *BASE,
        "user:story",
        "assistant:retold",
        "user:sequel?",
        "assistant:sequel",
    ]
    assert texts(mock.transcript(str(r[edit.id].response_id))) == [
        *BASE,
        "user:poem",
        "assistant:poem",
    ]
    assert texts(mock.transcript(str(r[thanks.id].response_id))) == [
        *BASE,
        "user:thanks",
        "assistant:bye",
    ]


@STREAMED
async def test_a_failed_attempt_is_never_chained_from(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "previous_response")
    mock.enqueue(Reply.text("hello"), Reply.text("lost"))  # the commit fault consumes "lost"
    first = await chat.send("hi", stream=streamed)
    mock.inject(Fault.status(500, commit=True))  # the server even stored it
    failed = chat.send("story", stream=streamed)
    with pytest.raises(Exception, match="boom"):
        await failed
    assert failed.status == "failed" and (await chat.record(failed.id)).status == "failed"
    again = await chat.retry(stream=streamed)
    hello = (await chat.record(first.id)).response_id
    assert wire(mock.response_requests[-1]) == (hello, None, ["user:story"])
    response = (await chat.record(again.id)).response_id
    assert texts(mock.transcript(str(response))) == [*BASE, "user:story", "assistant:echo: story"]


@STREAMED
async def test_an_overflowing_prompt_is_not_sent(mock: MockResponsesAPI, streamed: bool) -> None:
    chat = await open_chat(mock, "previous_response", budget=3)
    with pytest.raises(ContextOverflowError):  # refused at once: nothing is stored or sent
        await chat.send("far too many words for this budget", stream=streamed)
    assert mock.requests == []
    assert await chat.attempts() == []
    assert [n.role for n in chat.active_path()] == ["system"]
