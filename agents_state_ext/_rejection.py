"""A streamed run's input-guardrail rejection, applied once the app is told of it, not before.

The SDK can end a streamed run with ``InputGuardrailTripwireTriggered`` while the app's task is
being cancelled: the app then sees ``CancelledError``, not the tripwire. Had the input been
dropped as rejected when the run's task ended, the app would have lost it without a word. So
the rejection waits for ``stream_events()`` to raise the tripwire to the app; a stream that ends
any other way (cancelled, never consumed) keeps its input like any cancelled run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, cast

from agents import RunResultStreaming
from agents.exceptions import InputGuardrailTripwireTriggered


def reject_when_told(result: RunResultStreaming, reject: Callable[[], None]) -> None:
    """Make ``result.stream_events()`` call ``reject`` as it raises an input tripwire to the app."""
    original = result.stream_events

    async def stream_events() -> AsyncIterator[Any]:
        events = cast(AsyncGenerator[Any, None], original())  # an async generator in the SDK
        try:
            async for event in events:
                yield event
        except InputGuardrailTripwireTriggered:
            reject()  # no await between this and the app: nothing can cancel in between
            raise
        finally:
            await events.aclose()

    # The instance attribute shadows the method for this one result; the SDK never looks it up.
    setattr(result, "stream_events", stream_events)  # noqa: B010 (mypy refuses a method assign)
