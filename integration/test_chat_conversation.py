"""The chat API under the conversation strategy: linear server conversations, forked per branch."""

from __future__ import annotations

import pytest

from agents_state_ext import ConversationForkError
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._chat import open_chat, slow_reply, stop_midway
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

BASE = ["system:be brief", "user:hi", "assistant:hello"]


@STREAMED
async def test_stop_keeps_the_conversation_and_edit_and_switch_fork_new_ones(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "conversation")
    mock.enqueue(Reply.text("hello"), slow_reply(streamed=streamed))
    mock.enqueue(Reply.text("retold"), Reply.text("sequel"), Reply.text("poem"), Reply.text("bye"))

    first = await chat.send("hi", stream=streamed)
    main = (await chat.record(first.id)).cursor_after
    assert main is not None
    stopped = await stop_midway(chat.send("story", stream=streamed), streamed=streamed, mock=mock)
    assert stopped.status == "cancelled"
    # The server kept nothing of the stopped attempt (checked, not assumed): the retry and the
    # next turn go on the same conversation, with only the new turn.
    retry = await chat.retry(stream=streamed)
    await chat.send("sequel?", stream=streamed)
    edit = await chat.edit(stopped.user_id, "poem", stream=streamed)
    await chat.switch(first.id)
    assert chat.cursor is None  # the greeting's conversation has moved on: the next one forks
    thanks = await chat.send("thanks", stream=streamed)

    poem_conv = (await chat.record(edit.id)).cursor_before
    thanks_conv = (await chat.record(thanks.id)).cursor_before
    assert len({main, poem_conv, thanks_conv}) == 3
    assert [wire(b) for b in mock.response_requests] == [
        (None, main, ["user:hi"]),
        (None, main, ["user:story"]),
        (None, main, ["user:story"]),
        (None, main, ["user:sequel?"]),
        (None, poem_conv, ["user:poem"]),
        (None, thanks_conv, ["user:thanks"]),
    ]
    assert texts(mock.conversation_items(main)) == [
        *BASE,
        "user:story",
        "assistant:retold",
        "user:sequel?",
        "assistant:sequel",
    ]
    assert texts(mock.conversation_items(str(poem_conv))) == [*BASE, "user:poem", "assistant:poem"]
    assert texts(mock.conversation_items(str(thanks_conv))) == [
        *BASE,
        "user:thanks",
        "assistant:bye",
    ]
    assert edit.node.meta["forked_from"] == main
    assert edit.node.meta["seeded"] == ["m1", "m2", "m3"]
    assert retry.node.meta["server_conversation"] == main
    assert list((await chat.record(edit.id)).included) == ["m1", "m2", "m3", "m9"]


@STREAMED
async def test_an_attempt_the_server_kept_forks_the_retry(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "conversation")
    mock.enqueue(Reply.text("hello"), Reply.text("kept"), Reply.text("again"))
    first = await chat.send("hi", stream=streamed)
    main = str((await chat.record(first.id)).cursor_after)
    mock.inject(Fault.status(500, commit=True))  # the server appended it, the client never knew
    failed = chat.send("story", stream=streamed)
    with pytest.raises(Exception, match="boom"):
        await failed
    assert texts(mock.conversation_items(main))[-2:] == ["user:story", "assistant:kept"]
    retry = await chat.retry(stream=streamed)
    fork = str((await chat.record(retry.id)).cursor_before)
    assert fork != main
    assert texts(mock.conversation_items(fork)) == [*BASE, "user:story", "assistant:again"]


@STREAMED
async def test_without_forking_a_branch_fails_clearly_before_sending(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    conv = mock.create_conversation()
    chat = await open_chat(mock, "conversation", server_conversation_id=conv, fork=False)
    mock.enqueue(Reply.text("hello"), Reply.text("ok"))
    first = await chat.send("hi", stream=streamed)
    assert wire(mock.response_requests[0]) == (None, conv, ["system:be brief", "user:hi"])
    await chat.send("more", stream=streamed)
    await chat.switch(first.id)
    sent = len(mock.response_requests)
    attempt = chat.send("other", stream=streamed)
    with pytest.raises(ConversationForkError, match="forking is off"):
        await attempt
    assert len(mock.response_requests) == sent
    assert (await chat.record(attempt.id)).status == "failed"
    assert texts(mock.conversation_items(conv)) == [*BASE, "user:more", "assistant:ok"]
