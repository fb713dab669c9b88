"""What history the library sends itself does with reasoning items (``_reasoning``)."""

from __future__ import annotations

from typing import Any

import pytest

from agents_state_ext._reasoning import is_reasoning_model, self_contained


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def rs(item_id: str, *, encrypted: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
    if encrypted:
        item["encrypted_content"] = f"enc-{item_id}"
    return item


def msg(item_id: str, text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": item_id, "role": "assistant", "content": content}


def call(item_id: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": "f",
        "arguments": "",
    }


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


def test_encrypted_reasoning_goes_inline_with_its_items_unchanged() -> None:
    items = [user("hi"), rs("rs_1", encrypted=True), msg("msg_1", "hello"), user("again")]
    sent, carried = self_contained(items)
    assert sent == items
    assert all(a is b for a, b in zip(sent, items, strict=True))
    assert (carried.kept, carried.dropped) == (1, 0)


def test_reasoning_without_encrypted_content_goes_and_its_items_lose_their_ids() -> None:
    items = [
        user("weather?"),
        rs("rs_1", encrypted=False),
        call("fc_1", "call_1"),
        output("call_1"),
        rs("rs_2", encrypted=True),
        msg("msg_2", "sunny"),
    ]
    sent, carried = self_contained(items)
    assert [i.get("type", "message") for i in sent] == [
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "message",
    ]
    assert "id" not in sent[1] and sent[1]["call_id"] == "call_1"
    assert sent[4]["id"] == "msg_2"  # it belongs to rs_2, which is carried
    assert items[2]["id"] == "fc_1"  # the caller's items are not changed in place
    assert (carried.kept, carried.dropped) == (1, 1)


@pytest.mark.parametrize(
    "after",
    [[], [user("next")], [output("call_1")], [{"type": "reasoning", "id": "rs_9", "summary": []}]],
    ids=["last", "a user message", "a tool output", "another reasoning item"],
)
def test_reasoning_with_no_following_item_goes_even_when_encrypted(
    after: list[dict[str, Any]],
) -> None:
    items = [user("hi"), rs("rs_1", encrypted=True), *after]
    sent, carried = self_contained(items)
    assert all(i.get("id") != "rs_1" for i in sent)
    assert carried.dropped >= 1


def test_parallel_calls_after_a_dropped_reasoning_item_all_lose_their_ids() -> None:
    items = [user("two"), rs("rs_1", encrypted=False), call("fc_1", "c1"), call("fc_2", "c2")]
    sent, _ = self_contained(items)
    assert [i.get("id") for i in sent] == [None, None, None]
    assert [i.get("call_id") for i in sent[1:]] == ["c1", "c2"]


@pytest.mark.parametrize(
    ("name", "reasoning"),
    [
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("o3", True),
        ("o4-mini", True),
        ("openai/o1", True),
        ("gpt-4.1", False),
        ("gpt-4o", False),
        (None, False),
    ],
)
def test_reasoning_families(name: str | None, reasoning: bool) -> None:
    assert is_reasoning_model(name) is reasoning


def test_a_reasoning_item_counts_its_summary_not_its_encrypted_content() -> None:
    from agents_state_ext import TokenCounter

    counter = TokenCounter("gpt-5")
    summary = [{"type": "summary_text", "text": "Check the weather first."}]
    small = {"type": "reasoning", "id": "rs_1", "summary": summary}
    big = {**small, "encrypted_content": "x" * 5000}
    expected = 3 + counter.count_text("Check the weather first.")
    assert counter.count_items([small]) == expected
    assert counter.count_items([big]) == expected
    # The batched path agrees with the one-message path.
    assert counter.count_many([("a", [big]), ("b", [user("hi")])])[0] == expected
