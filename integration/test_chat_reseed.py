"""A lost ``previous_response_id`` (expired, never stored, forgotten) re-seeds the chain.

The chat holds the whole branch, so when the Responses API no longer knows the response an
attempt chains from, the same attempt is sent once more on a new chain carrying the branch as
the replay strategy would build it (same selection, same budget); later turns chain from it.
"""

from __future__ import annotations

import pytest

from agents_state_ext import ContextOverflowError
from agents_state_ext.chat import Attempt, Conversation
from agents_state_ext.testing import MockResponsesAPI

from ._chat import open_chat, slow_reply, stop_midway
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

SYSTEM = "system:be brief"


async def two_turns(chat: Conversation, *, streamed: bool) -> tuple[Attempt, Attempt]:
    first = await chat.send("hi", stream=streamed)
    second = await chat.send("one", stream=streamed)
    return first, second


@STREAMED
@pytest.mark.parametrize("action", ["send", "retry", "edit"])
async def test_a_lost_previous_response_reseeds_the_branch_once(
    mock: MockResponsesAPI, streamed: bool, action: str
) -> None:
    chat = await open_chat(mock, "previous_response")
    first, second = await two_turns(chat, streamed=streamed)
    lost = chat.cursor if action == "send" else (await chat.record(first.id)).response_id
    mock.expire_response()  # retention ran out for every stored response
    sent_before = len(mock.response_requests)

    if action == "send":
        attempt = await chat.send("two", stream=streamed)
        branch = ["user:hi", "assistant:echo: hi", "user:one", "assistant:echo: one", "user:two"]
    elif action == "retry":
        attempt = await chat.retry(stream=streamed)
        branch = ["user:hi", "assistant:echo: hi", "user:one"]
    else:
        attempt = await chat.edit(second.user_id, "uno", stream=streamed)
        branch = ["user:hi", "assistant:echo: hi", "user:uno"]

    # One failed request on the lost chain, then the same attempt once more on a new chain,
    # carrying the whole branch (every complete pair once, the new user message once).
    assert [wire(b) for b in mock.response_requests[sent_before:]] == [
        (lost, None, [branch[-1]]),
        (None, None, [SYSTEM, *branch]),
    ]
    record = await chat.record(attempt.id)
    assert (attempt.status, record.status) == ("complete", "complete")
    assert record.reseeded_from == lost
    assert record.cursor_before is None
    assert record.cursor_after == record.response_id
    assert list(record.included) == [n.id for n in chat.active_path()[:-1]]
    new_chain = str(record.response_id)
    answer = f"assistant:echo: {branch[-1].removeprefix('user:')}"
    assert texts(mock.transcript(new_chain)) == [SYSTEM, *branch, answer]

    # The re-seeded response is the branch's cursor now: the next turn chains from it.
    assert chat.cursor == new_chain
    after = await chat.send("three", stream=streamed)
    assert wire(mock.response_requests[-1]) == (new_chain, None, ["user:three"])
    assert texts(mock.transcript(str((await chat.record(after.id)).response_id))) == [
        SYSTEM,
        *branch,
        answer,
        "user:three",
        "assistant:echo: three",
    ]
    assert (await chat.record(after.id)).reseeded_from is None
    # Re-opened from the store, the record still says it re-seeded.
    assert (await chat.store.get_attempt(chat.id, record.attempt_id)).reseeded_from == lost


@STREAMED
async def test_the_reseed_selects_and_budgets_exactly_as_replay(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chats = {s: await open_chat(mock, s, budget=14) for s in ("previous_response", "replay")}
    for chat in chats.values():
        for text in ("alpha beta gamma", "delta epsilon", "zeta eta theta"):
            await chat.send(text, stream=streamed)
    mock.expire_response()
    for chat in chats.values():
        await chat.send("iota kappa", stream=streamed)
    *_, reseeded, replayed = mock.response_requests
    assert reseeded.get("previous_response_id") is None
    assert wire(reseeded) == wire(replayed)
    # Within 14 tokens the newest pair does not fit; an older one does (the selection rule).
    assert wire(reseeded)[2] == [
        SYSTEM,
        "user:delta epsilon",
        "assistant:echo: delta epsilon",
        "user:iota kappa",
    ]
    ours, theirs = [(await chat.attempts())[-1] for chat in chats.values()]
    assert (ours.included, ours.used, ours.budget) == (theirs.included, theirs.used, theirs.budget)


@STREAMED
async def test_an_unknown_response_answered_with_404_reseeds_too(streamed: bool) -> None:
    async with MockResponsesAPI(previous_response_not_found_status=404) as mock:
        chat = await open_chat(mock, "previous_response")
        await chat.send("hi", stream=streamed)
        mock.expire_response()
        attempt = await chat.send("again", stream=streamed)
        assert wire(mock.response_requests[-1]) == (
            None,
            None,
            [SYSTEM, "user:hi", "assistant:echo: hi", "user:again"],
        )
        assert (await chat.record(attempt.id)).reseeded_from is not None


@STREAMED
async def test_a_reseed_that_overflows_the_budget_fails_before_it_is_sent(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "previous_response", system="be very very very brief", budget=9)
    await chat.send("hi", stream=streamed)
    mock.expire_response()
    sent_before = len(mock.response_requests)
    attempt = chat.send("and now a longer question", stream=streamed)
    with pytest.raises(ContextOverflowError):
        await attempt
    assert len(mock.response_requests) == sent_before + 1  # only the request that found no chain
    record = await chat.record(attempt.id)
    assert (record.status, record.overflow) == ("failed", True)
    assert attempt.status == "failed"


@STREAMED
async def test_a_reseeded_attempt_can_still_be_stopped(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "previous_response")
    await chat.send("hi", stream=streamed)
    mock.expire_response()
    mock.enqueue(slow_reply(streamed=streamed))
    stopped = await stop_midway(chat.send("story", stream=streamed), streamed=streamed, mock=mock)
    record = await chat.record(stopped.id)
    assert (stopped.status, record.status) == ("cancelled", "cancelled")
    assert record.reseeded_from is not None
    # A cancelled attempt is never chained from: the next one re-seeds from the stored branch
    # (the lost cursor is still the nearest complete answer's) and sends the story once.
    again = await chat.retry(stream=streamed)
    assert wire(mock.response_requests[-1]) == (
        None,
        None,
        [SYSTEM, "user:hi", "assistant:echo: hi", "user:story"],
    )
    assert (await chat.record(again.id)).reseeded_from == record.reseeded_from
