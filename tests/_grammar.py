"""The event types the mock streams for simple replies, so tests name frames by type, not index.

The grammar itself is checked frame by frame in ``test_mock_server_streaming.py`` and against
openai's types in ``test_mock_types.py``; these helpers only spell the expected lists.
"""

from __future__ import annotations

START = ["response.created", "response.in_progress"]


def message(deltas: int) -> list[str]:
    """The events of one message with one ``output_text`` part streamed in ``deltas`` deltas."""
    return [
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]


def call(deltas: int = 1) -> list[str]:
    """The events of one function call whose arguments stream in ``deltas`` deltas."""
    return [
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * deltas,
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]


def stream(*items: list[str], terminal: str = "response.completed") -> list[str]:
    """A whole stream: the start events, ``items``' events, the terminal event."""
    return [*START, *(event for item in items for event in item), terminal]


def through(events: list[str], event_type: str, nth: int = 1) -> int:
    """How many frames are sent up to and including the ``nth`` frame of ``event_type``."""
    seen = 0
    for count, event in enumerate(events, start=1):
        if event == event_type:
            seen += 1
            if seen == nth:
                return count
    raise ValueError(f"no {event_type} #{nth} in {events}")
