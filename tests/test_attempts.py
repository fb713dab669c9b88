"""AttemptRecord round-trips, and explain() says what differed between two attempts."""

from __future__ import annotations

import json

from agents_state_ext._attempts import AttemptDiff, AttemptRecord, explain


def record(**changes: object) -> AttemptRecord:
    base: dict[str, object] = {
        "message_id": "a1",
        "attempt_id": "att_1",
        "parent_user_id": "u1",
        "request_id": "req_1",
        "model": "gpt-4.1",
        "prompt_version": "v3",
        "sampling": {"temperature": 0.2, "top_p": 1.0, "seed": 7},
        "included": {"sys": 12, "u0": 30, "a0": 41, "u1": 9},
        "budget": 8000,
        "used": 92,
        "overflow": False,
        "state_owner": "client",
        "response_id": "resp_1",
        "usage": {"input_tokens": 95, "output_tokens": 40},
        "status": "complete",
    }
    base.update(changes)
    return AttemptRecord(**base)  # type: ignore[arg-type]


def test_round_trip_through_json() -> None:
    original = record(cursor_before="resp_0", cursor_after="resp_1", started_at=1.5)
    data = json.loads(json.dumps(original.to_dict()))
    assert AttemptRecord.from_dict(data) == original
    assert AttemptRecord.from_dict({**data, "added_in_a_later_version": 1}) == original


def test_identical_inputs_explain_to_nothing() -> None:
    diff = explain(record(), record(attempt_id="att_2", response_id="resp_2", status="cancelled"))
    assert not diff
    assert diff.text() == "attempt att_1 -> att_2:\n  identical request: nothing sent differed"


def test_explain_budget_and_sampling() -> None:
    first = record()
    second = record(
        attempt_id="att_2",
        sampling={"temperature": 0.9, "top_p": 1.0, "max_output_tokens": 500},
        included={"sys": 12, "a0": 44, "u1": 9, "u_new": 3},
        budget=60,
        used=68,
        overflow=True,
    )
    diff = explain(first, second)
    assert diff
    assert diff.sampling == {
        "max_output_tokens": (None, 500),
        "seed": (7, None),
        "temperature": (0.2, 0.9),
    }
    assert (diff.budget, diff.used, diff.overflow) == ((8000, 60), (92, 68), (False, True))
    assert diff.added == {"u_new": 3}
    assert diff.removed == {"u0": 30}
    assert diff.retokenized == {"a0": (41, 44)}
    assert diff.model is None and diff.prompt_version is None and diff.state_owner is None
    text = str(diff)
    for line in (
        "budget: 8000 -> 60",
        "overflow: False -> True",
        "sampling.temperature: 0.2 -> 0.9",
        "sampling.seed: 7 -> None",
        "+ message u_new (3 tokens)",
        "- message u0 (30 tokens)",
        "~ message a0: 41 -> 44 tokens",
    ):
        assert line in text


def test_explain_model_prompt_owner_and_cursor_before() -> None:
    """Inputs only: the cursor the request started from differs, the one it produced is output."""
    first = record(
        state_owner="previous_response_id", cursor_before="resp_0", cursor_after="resp_1"
    )
    second = record(
        attempt_id="att_2",
        model="gpt-5",
        prompt_version="v4",
        state_owner="client",
        cursor_before=None,
        cursor_after=None,
    )
    diff = explain(first, second)
    assert diff == AttemptDiff(
        first="att_1",
        second="att_2",
        model=("gpt-4.1", "gpt-5"),
        prompt_version=("v3", "v4"),
        state_owner=("previous_response_id", "client"),
        cursor_before=("resp_0", None),
    )
    assert "model: 'gpt-4.1' -> 'gpt-5'" in diff.text()
