"""The verdict of the interruption suite catches each kind of damage, and only damage."""

from __future__ import annotations

from typing import Any

import pytest

from agents_state_ext import INTERRUPTED_TOOL_OUTPUT
from agents_state_ext.testing import Fault, RecordedRequest

from ._soundness import UnsoundTranscript, assert_transcript_sound, transcript_problems


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def said(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"text": text}]}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "lookup"}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "sunny"}


SOUND = [
    user("w-1"),
    said("answer to w-1"),
    user("X-1"),  # a rewriting filter may change case
    call("c1"),
    call("c2"),
    output("c2"),
    output("c1"),
    user("f-1"),
    said("answer to f-1"),
]


def request(status: int, fault: Fault | None = None) -> RecordedRequest:
    record = RecordedRequest("POST", "/responses", "u", {}, {}, status=status, fault=fault)
    record.error = "No tool output found for function call c1."
    return record


def test_a_sound_transcript_passes() -> None:
    injected = [request(500, Fault.status(500)), request(429, Fault.rate_limit())]
    assert_transcript_sound("cell", SOUND, ["w-1", "x-1", "f-1"], injected)


@pytest.mark.parametrize(
    ("items", "kind"),
    [
        ([i for i in SOUND if i != user("X-1")], "user input lost"),
        ([*SOUND[:3], user("x-1"), *SOUND[3:]], "user input duplicated"),
        ([*SOUND[:3], user("z-9"), *SOUND[3:]], "phantom user message"),
        ([SOUND[2], *SOUND[:2], *SOUND[3:]], "user inputs out of order"),
        ([i for i in SOUND if i != output("c2")], "function call without output"),
        ([*SOUND, output("c2")], "tool output duplicated"),
        ([*SOUND, call("c1")], "function call duplicated"),
        ([*SOUND, output("c9")], "tool output without its call"),
        ([*SOUND, said("answer to f-1")], "answer duplicated"),
        ([*SOUND[:7], said("answer to z-1"), *SOUND[7:]], "answer filed under the wrong turn"),
    ],
)
def test_each_kind_of_damage_is_named(items: list[dict[str, Any]], kind: str) -> None:
    with pytest.raises(UnsoundTranscript, match=f"^cell: .*{kind}") as failure:
        assert_transcript_sound("cell", items, ["w-1", "x-1", "f-1"])
    assert [p.kind for p in failure.value.problems] == [kind]


def test_an_output_closed_as_interrupted_is_lost_only_if_its_tool_returned() -> None:
    closed = [{**i, "output": INTERRUPTED_TOOL_OUTPUT} if i == output("c1") else i for i in SOUND]
    users = ["w-1", "x-1", "f-1"]
    assert transcript_problems(closed, users, finished={"c2"}) == []
    problems = transcript_problems(closed, users, finished={"c1", "c2"})
    assert [(p.kind, p.detail) for p in problems] == [
        ("tool output lost", "c1 closed as interrupted though its tool returned")
    ]


def test_an_error_status_nothing_injected_is_named_with_its_message() -> None:
    problems = transcript_problems(SOUND, ["w-1", "x-1", "f-1"], [request(400)])
    assert [p.kind for p in problems] == ["HTTP 400 No tool output found for function call c1."]
