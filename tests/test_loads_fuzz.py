"""``ConversationState.loads`` on fuzzed blobs raises ``StateBlobError`` and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, RunState
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_state_ext import ConversationState, ServerConversationTracker, StateBlobError

AGENT: Agent[Any] = Agent(name="a", model="gpt-4.1")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def valid_blob() -> dict[str, Any]:
    """A real envelope: a fresh RunState and a ledger with some history."""
    state = ConversationState.previous_response(prompt_cache_key="k")
    tracker = state.tracker
    assert tracker is not None
    tracker.mark_sent([{"role": "user", "content": "hi"}])
    tracker.acknowledge(
        "resp_1", [{"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f"}]
    )
    run_state: RunState[Any] = RunState(
        context=RunContextWrapper(context=None),
        original_input="hi",
        starting_agent=AGENT,
        max_turns=3,
    )
    return dict(json.loads(state.dumps(run_state)))


BLOB = valid_blob()


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(paths(child, (*prefix, index)))
    return found


PATHS = [p for p in paths(BLOB) if p]


def replaced(blob: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(blob))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return dict(copy)


def load(text: str | bytes) -> None:
    asyncio.run(ConversationState.loads(AGENT, text))


def test_the_valid_blob_loads() -> None:
    load(json.dumps(BLOB))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=JSON)
def test_any_value_anywhere_raises_only_state_blob_error(path: tuple[Any, ...], value: Any) -> None:
    with contextlib.suppress(StateBlobError):
        load(json.dumps(replaced(BLOB, path, value)))


@settings(max_examples=200, deadline=None)
@given(
    cut=st.integers(min_value=0, max_value=len(json.dumps(BLOB)) - 1), junk=st.binary(max_size=8)
)
def test_truncated_or_corrupted_bytes_raise_state_blob_error(cut: int, junk: bytes) -> None:
    raw = json.dumps(BLOB).encode()
    with pytest.raises(StateBlobError):
        load(raw[:cut] + junk + b"\xff" if junk else raw[:cut])


@pytest.mark.parametrize("depth", [5_000, 200_000])
def test_deeply_nested_json_raises_state_blob_error(depth: int) -> None:
    with pytest.raises(StateBlobError):
        load("[" * depth + "]" * depth)
    nested = json.dumps(BLOB).replace('"run_state":', '"run_state":' + "[" * depth, 1)
    with pytest.raises(StateBlobError):
        load(nested)


def test_an_unparseable_run_state_raises_state_blob_error() -> None:
    for run_state in ({"$schemaVersion": "1.17"}, {"$schemaVersion": "1.0", "current_turn": "x"}):
        with pytest.raises(StateBlobError):
            load(json.dumps(replaced(BLOB, ("payload", "run_state"), run_state)))


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(sorted(BLOB["payload"]["tracker"])), value=JSON)
def test_tracker_from_dict_raises_only_state_blob_error(key: str, value: Any) -> None:
    data = dict(BLOB["payload"]["tracker"], **{key: value})
    with contextlib.suppress(StateBlobError):
        ServerConversationTracker.from_dict(data)
