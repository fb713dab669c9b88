"""Tool approvals in the chat API: an attempt waits as ``awaiting_approval``, then resumes.

Under every strategy, streamed and not: the pause is stored (the run beside the attempt), the
pending calls are readable from any handle, a decision taken in another process resumes the
run with nothing re-sent and nothing lost, and the chat refuses other attempts meanwhile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool

import agents_state_ext as ase
from agents_state_ext import InMemoryStore, SQLiteStore, open_conversation
from agents_state_ext.testing import FixedTokenCounter, MockResponsesAPI, Reply, ResponseContext

from ._chat import ids
from ._support import STREAMED, texts, wire

pytestmark = pytest.mark.anyio

STRATEGIES = ("replay", "session", "previous_response", "conversation")
EACH_STRATEGY = pytest.mark.parametrize("strategy", STRATEGIES)
REPO = Path(__file__).resolve().parents[1]
DELETED: list[str] = []


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    DELETED.append(path)
    return f"deleted {path}"


def answers(context: ResponseContext) -> Reply:
    """Asked to delete, the model calls the tool once per path; told the outcome, it says so."""
    last = context.items[-1]
    if last.get("type") == "function_call_output":
        return Reply.text(f"tool said: {last.get('output')}")
    said = context.last_user_text or ""
    if said.startswith("delete "):
        paths = said.removeprefix("delete ").split(" and ")
        return Reply.tool_calls([("delete_file", {"path": p}) for p in paths])
    return Reply.text(f"echo: {said}")


def agent_for(mock: MockResponsesAPI) -> Agent[Any]:
    return Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[delete_file])


async def open_chat(mock: MockResponsesAPI, strategy: str, store: Any = None) -> ase.Conversation:
    return await open_conversation(
        store if store is not None else InMemoryStore(),
        strategy=strategy,  # type: ignore[arg-type]
        agent=agent_for(mock),
        counter=FixedTokenCounter(),
        system="be brief",
        id_factory=ids(),
    )


@pytest.fixture(autouse=True)
def scripted(mock: MockResponsesAPI) -> None:
    mock.responder = answers
    DELETED.clear()


APPROVE_ELSEWHERE = """
import asyncio, json, sys
from agents_state_ext import SQLiteStore, open_conversation

async def main():
    decided = {}
    async with SQLiteStore(sys.argv[1]) as store:
        for chat_id in await store.list_conversations():
            # no agent: deciding needs none
            chat = await open_conversation(store, chat_id, create=False)
            pending = await chat.pending_approvals()
            await chat.approve(pending[0].call_id)
            decided[chat_id] = [(a.call_id, a.decision) for a in await chat.pending_approvals()]
    print(json.dumps(decided))

asyncio.run(main())
"""


def approve_in_another_process(db: Path) -> dict[str, list[list[str]]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", APPROVE_ELSEWHERE, str(db)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    decided: dict[str, list[list[str]]] = json.loads(done.stdout)
    return decided


async def test_a_pause_survives_a_restart_and_is_decided_in_another_process(
    mock: MockResponsesAPI, tmp_path: Path
) -> None:
    db = tmp_path / "chats.sqlite3"
    cells = [(strategy, streamed) for strategy in STRATEGIES for streamed in (False, True)]
    paused: dict[str, tuple[str, bool, str]] = {}
    async with SQLiteStore(db) as store:
        for strategy, streamed in cells:
            chat = await open_chat(mock, strategy, store)
            await chat.send("hi", stream=streamed)
            attempt = await chat.send("delete /tmp/x", stream=streamed)
            assert attempt.status == "awaiting_approval"
            assert [(a.tool_name, a.arguments, a.decision) for a in attempt.approvals] == [
                ("delete_file", '{"path": "/tmp/x"}', None)
            ]
            record = await chat.record(attempt.id)
            assert (record.status, record.finished_at) == ("awaiting_approval", None)
            assert await store.get_run_state(chat.id, attempt.attempt_id) is not None
            paused[chat.id] = (strategy, streamed, attempt.id)
    assert DELETED == []

    # The process "restarts"; a person approves from another process, much later.
    decided = approve_in_another_process(db)
    assert {chat_id: [d[1] for d in calls] for chat_id, calls in decided.items()} == {
        chat_id: ["approved"] for chat_id in paused
    }

    async with SQLiteStore(db) as store:
        for chat_id, (strategy, streamed, node_id) in paused.items():
            chat = await open_conversation(store, chat_id, agent=agent_for(mock))
            requests = len(mock.response_requests)
            paused_at = await chat.record(node_id)
            resumed = await chat.resume(stream=streamed)
            assert resumed.id == node_id and resumed.status == "complete"
            assert resumed.text == "tool said: deleted /tmp/x"
            assert len(mock.response_requests) == requests + 1  # one request: the tool's output
            previous, conversation, sent = wire(mock.response_requests[-1])
            call_id = decided[chat_id][0][0]
            if strategy in ("previous_response", "conversation"):
                assert sent == [f"function_call_output:{call_id}"]  # only what the server lacks
                assert (previous or conversation) == paused_at.cursor_after
            else:
                assert sent == [
                    "system:be brief",
                    "user:hi",
                    "assistant:echo: hi",
                    "user:delete /tmp/x",
                    f"function_call:{call_id}",
                    f"function_call_output:{call_id}",
                ]
            record = await chat.record(node_id)
            assert record.status == "complete" and record.finished_at is not None
            assert [(a["call_id"], a["decision"]) for a in record.approvals] == [
                (call_id, "approved")
            ]
            assert await store.get_run_state(chat_id, record.attempt_id) is None
            final = await chat.send("thanks", stream=streamed)
            seen = texts(mock.transcript(str((await chat.record(final.id)).response_id)))
            assert seen == [
                "system:be brief",
                "user:hi",
                "assistant:echo: hi",
                "user:delete /tmp/x",
                f"function_call:{call_id}",
                f"function_call_output:{call_id}",
                "assistant:tool said: deleted /tmp/x",
                "user:thanks",
                "assistant:echo: thanks",
            ]
    assert len(DELETED) == len(cells)  # each approved call ran exactly once


@EACH_STRATEGY
@STREAMED
async def test_a_rejection_reaches_the_model_and_the_tool_never_runs(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy)
    attempt = await chat.send("delete /etc", stream=streamed)
    (call,) = attempt.approvals
    decided = await chat.reject(call.call_id, message="not that one")
    assert [(a.decision, a.message) for a in decided] == [("rejected", "not that one")]
    done = await chat.resume(stream=streamed)
    assert done.status == "complete" and done.text == "tool said: not that one"
    assert DELETED == []
    last = mock.response_requests[-1]["input"]
    outputs = [i for i in last if i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [(call.call_id, "not that one")]


@EACH_STRATEGY
@STREAMED
async def test_other_attempts_wait_and_stop_drops_the_waiting_run(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    chat = await open_chat(mock, strategy)
    first = await chat.send("hi", stream=streamed)
    attempt = await chat.send("delete /a and /b", stream=streamed)
    assert [a.arguments for a in attempt.approvals] == ['{"path": "/a"}', '{"path": "/b"}']
    sent, nodes = len(mock.response_requests), len(chat.graph)
    for action in (
        lambda: chat.send("meanwhile"),
        lambda: chat.retry(),
        lambda: chat.edit(first.user_id, "hello"),
        lambda: chat.resume(),
    ):
        with pytest.raises(ase.ApprovalPendingError) as refused:
            action()
        assert len(refused.value.call_ids) == 2
    await chat.approve(attempt.approvals[0].call_id)
    with pytest.raises(ase.ApprovalPendingError) as refused:
        chat.resume()  # one call is still undecided
    assert refused.value.call_ids == [attempt.approvals[1].call_id]
    assert (len(mock.response_requests), len(chat.graph)) == (sent, nodes)

    stopped = await chat.stop()
    assert stopped is not None and stopped.id == attempt.id and stopped.status == "cancelled"
    assert (await chat.record(attempt.id)).status == "cancelled"
    assert await chat.pending_approvals() == [] and await chat.awaiting_approval() is None
    assert await chat.store.get_run_state(chat.id, attempt.attempt_id) is None
    again = await chat.send("never mind", stream=streamed)
    assert again.status == "complete" and DELETED == []
    previous, _, carried = wire(mock.response_requests[-1])
    if strategy == "previous_response":
        assert previous == (await chat.record(first.id)).response_id  # not the abandoned one
    assert "user:delete /a and /b" not in carried


@pytest.mark.parametrize("strategy", ["replay", "previous_response"])
@STREAMED
async def test_a_resumed_run_that_needs_another_approval_waits_again(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    def two_steps(context: ResponseContext) -> Reply:
        outputs = [i for i in context.items if i.get("type") == "function_call_output"]
        if len(outputs) < 2:
            return Reply.tool_call("delete_file", {"path": f"/step{len(outputs)}"})
        return Reply.text("both done")

    mock.responder = two_steps
    chat = await open_chat(mock, strategy)
    attempt = await chat.send("clean up", stream=streamed)
    await chat.approve()
    again = await chat.resume(stream=streamed)
    assert again.id == attempt.id and again.status == "awaiting_approval"
    assert [a.arguments for a in again.approvals] == ['{"path": "/step1"}']
    await chat.approve()
    done = await chat.resume(stream=streamed)
    assert done.status == "complete" and done.text == "both done"
    assert DELETED == ["/step0", "/step1"]
    assert [r.status for r in await chat.attempts()] == ["complete"]
