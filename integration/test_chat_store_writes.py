"""The chat on the async store: what reaches the store, when, and in how many transactions.

An attempt's start (its messages and its ``queued`` record) is one commit, made before its
request goes out; its end (the final node and record) is one commit too. Settings are stored at
once; ``refresh`` shows what another handle changed; a run through ``chat.session()`` that a
read filed in memory reaches the store before the chat's next action.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from agents import Agent, Runner

from agents_state_ext import AttemptRecord, InMemoryStore, Node, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply

from ._chat import ids, open_chat
from ._support import STREAMED, wire

pytestmark = pytest.mark.anyio

STRATEGIES = pytest.mark.parametrize(
    "strategy", ["replay", "session", "previous_response", "conversation"]
)


class Recording(InMemoryStore):
    """An in-memory store that notes every commit it took: what it carried, and when."""

    def __init__(self, mock: MockResponsesAPI) -> None:
        super().__init__()
        self.mock = mock
        self.commits: list[tuple[int, dict[str, str], dict[str, str]]] = []
        """(requests the mock had received, node id -> status, message id -> record status)"""

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
    ) -> None:
        nodes, attempts = list(nodes), list(attempts)
        await super().commit(
            conversation_id, nodes, expected_head=expected_head, new_head=new_head,
            attempts=attempts,
        )  # fmt: skip
        self.commits.append(
            (
                len(self.mock.response_requests),
                {n.id: n.status for n in nodes},
                {r.message_id: r.status for r in attempts},
            )
        )


@STRATEGIES
@STREAMED
async def test_an_attempt_starts_and_ends_in_one_commit_each_its_start_before_the_request(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    store = Recording(mock)
    chat = await open_chat(mock, strategy, store=store)
    attempt = await chat.send("hi", stream=streamed)
    assert attempt.status == "complete"

    mine = [c for c in store.commits if attempt.id in c[1] or attempt.id in c[2]]
    start, end = mine[0], mine[-1]
    # The start: the user message, the queued answer and its queued record, all in one
    # transaction, stored while the mock had received no request yet.
    assert start == (0, {attempt.user_id: "complete", attempt.id: "queued"}, {attempt.id: "queued"})
    # The end: the complete answer and its complete record, in one transaction.
    assert (end[1][attempt.id], end[2][attempt.id]) == ("complete", "complete")
    assert len(mock.response_requests) == 1


@STREAMED
async def test_a_stop_before_the_request_goes_out_sends_nothing_and_is_stored_cancelled(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "replay")
    attempt = chat.send("hi", stream=streamed)
    stopped = await attempt.stop()
    assert stopped.status == "cancelled"
    assert mock.response_requests == []
    assert (await chat.record(attempt.id)).status == "cancelled"
    assert (await chat.store.get_node(chat.id, attempt.id)).status == "cancelled"

    # The chat goes on at once; the stopped turn never pairs, so it is not sent.
    await chat.send("again", stream=streamed)
    assert wire(mock.response_requests[-1])[2] == ["system:be brief", "user:again"]


async def test_settings_are_stored_at_once_and_assigning_them_says_how(
    mock: MockResponsesAPI,
) -> None:
    store = InMemoryStore()
    chat = await open_chat(mock, "replay", store=store, budget=50, prompt_version="v1")
    await chat.set_budget(7)
    await chat.set_prompt_version("v2")
    with pytest.raises(ValueError, match="positive integer"):
        await chat.set_budget(0)
    with pytest.raises(AttributeError, match=r"await chat\.set_budget\(9\)"):
        chat.budget = 9
    with pytest.raises(AttributeError, match=r"set_prompt_version"):
        chat.prompt_version = "v3"
    assert (chat.budget, chat.prompt_version) == (7, "v2")
    again = await open_conversation(store, chat.id, create=False)
    assert (again.budget, again.prompt_version) == (7, "v2")

    # A budget given when opening a stored chat is kept for later openings too.
    await open_conversation(store, chat.id, budget=30)
    assert (await open_conversation(store, chat.id)).budget == 30


async def test_refresh_shows_what_another_handle_changed(mock: MockResponsesAPI) -> None:
    store = InMemoryStore()
    one = await open_chat(mock, "replay", store=store)
    await one.send("hi")
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    two = await open_conversation(store, one.id, agent=agent, counter=FixedTokenCounter())
    await two.send("from two")
    await two.set_budget(40)
    assert [n.text() for n in one.active_path()][-2:] == ["hi", "echo: hi"]  # as last read

    await one.refresh()
    assert [n.text() for n in one.active_path()][-2:] == ["from two", "echo: from two"]
    assert one.budget == 40
    await one.send("from one")  # on the branch as it now is: no lost race
    assert wire(mock.response_requests[-1])[2][-3:] == [
        "user:from two",
        "assistant:echo: from two",
        "user:from one",
    ]


async def test_a_session_run_a_read_filed_reaches_the_store_before_the_next_action(
    mock: MockResponsesAPI,
) -> None:
    store = InMemoryStore()
    chat = await open_conversation(
        store, strategy="session", counter=FixedTokenCounter(), id_factory=ids()
    )
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("hello"))
    await Runner.run(agent, "hi", session=chat.session())
    answer = chat.active_path()[-1]  # a synchronous read files the run in memory at once
    assert (answer.role, answer.status) == ("assistant", "complete")

    records = await chat.attempts()  # awaits the store write the read scheduled
    assert [r.status for r in records] == ["complete"]
    other = await open_conversation(store, chat.id, create=False)
    assert other.node(answer.id).status == "complete"
