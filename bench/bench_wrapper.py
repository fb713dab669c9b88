"""Wrapper overhead: ``ConversationState.previous_response().run()`` vs the SDK's own chaining.

One agent with one function tool; a run of N turns is N tool-call responses and a final text
answer (N + 1 model requests). Ours: ``ConversationState.previous_response().run(...)`` /
``.run_streamed(...)``, a new state per run. Theirs: ``Runner.run(...,
auto_previous_response_id=True)``, the SDK's own ``previous_response_id`` chaining. Both with
``max_turns`` raised to N + 5.

Two backends: the stateful mock Responses API (``MockResponsesAPI``, real ``AsyncOpenAI`` and
``OpenAIResponsesModel`` over an httpx2 MockTransport, so HTTP and parsing are in the loop) and
a no-network ``Model`` that returns canned responses, which isolates the CPU cost of the SDK and
the wrapper.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, Reply, ResponseContext

from ._common import Row, Section

LENGTHS = (1, 50, 500)
QUICK_LENGTHS = (1, 5)
PROMPT = "Look up each order in turn and tell me which are late."


@function_tool
def lookup_order(order_id: str) -> str:
    """Status of one order."""
    return f"{order_id}: shipped"


def _call_output(k: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{k}",
        call_id=f"call_{k}",
        type="function_call",
        name="lookup_order",
        arguments=f'{{"order_id": "ord_{k:05d}"}}',
        status="completed",
    )


def _text_output(k: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{k}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="All on time.", annotations=[])],
    )


class CannedModel(Model):
    """No network: ``tool_calls`` function calls, then a text answer; ids never repeat."""

    def __init__(self, tool_calls: int) -> None:
        self.tool_calls = tool_calls
        self.calls = 0

    def _next(self) -> tuple[str, list[Any]]:
        self.calls += 1
        k = self.calls
        output: list[Any] = [_call_output(k) if k <= self.tool_calls else _text_output(k)]
        return f"resp_{k}", output

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response_id, output = self._next()
        return ModelResponse(output=output, usage=Usage(), response_id=response_id)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        response_id, output = self._next()
        response = Response(
            id=response_id,
            created_at=0,
            model="canned",
            object="response",
            output=output,
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
            status="completed",
        )
        yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=0)
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=1
        )


def _mock_responder(tool_calls: int) -> Callable[[ResponseContext], Reply]:
    def respond(ctx: ResponseContext) -> Reply:
        if ctx.call_index < tool_calls:
            return Reply.tool_call("lookup_order", {"order_id": f"ord_{ctx.call_index:05d}"})
        return Reply.text("All on time.")

    return respond


async def _consume(result: Any) -> None:
    async for _ in result.stream_events():
        pass


def _runner(
    side: str, streamed: bool, make_agent: Callable[[], Agent[Any]], turns: int
) -> Callable[[], Awaitable[Any]]:
    max_turns = turns + 5

    async def ours() -> Any:
        state = ConversationState.previous_response()
        if streamed:
            result = state.run_streamed(make_agent(), PROMPT, max_turns=max_turns)
            await _consume(result)
            return result
        return await state.run(make_agent(), PROMPT, max_turns=max_turns)

    async def sdk() -> Any:
        kwargs: dict[str, Any] = {"max_turns": max_turns, "auto_previous_response_id": True}
        if streamed:
            result = Runner.run_streamed(make_agent(), PROMPT, **kwargs)
            await _consume(result)
            return result
        return await Runner.run(make_agent(), PROMPT, **kwargs)

    return ours if side == "ours" else sdk


async def _time_pair(
    backend: str, turns: int, streamed: bool, repeats: int
) -> tuple[float, float, list[str]]:
    """Median seconds per run of ours and the SDK's, interleaved; and failed checks."""
    samples: dict[str, list[float]] = {"ours": [], "sdk": []}
    problems: list[str] = []
    settings = ModelSettings(store=True)
    mock: MockResponsesAPI | None = None
    if backend == "mock":
        mock = MockResponsesAPI()
        mock.start()
    try:
        for rep in range(repeats + 1):
            for side in ("ours", "sdk") if rep % 2 == 0 else ("sdk", "ours"):
                if mock is not None:
                    mock.reset()
                    mock.responder = _mock_responder(turns)
                    model: Model = mock.model()
                else:
                    model = CannedModel(turns)

                def make_agent(model: Model = model) -> Agent[Any]:
                    return Agent(
                        name="bench",
                        model=model,
                        tools=[lookup_order],
                        model_settings=settings,
                    )

                go = _runner(side, streamed, make_agent, turns)
                gc.collect()
                start = time.perf_counter()
                result = await go()
                elapsed = time.perf_counter() - start
                requests = len(result.raw_responses)
                if requests != turns + 1:
                    problems.append(f"{side} made {requests} requests, expected {turns + 1}")
                if mock is not None:
                    wire = mock.response_requests
                    # Chained: every request after the first carries exactly one new item.
                    if any(len(body["input"]) != 1 for body in wire[1:]):
                        problems.append(f"{side} re-sent history on the wire")
                if rep:  # the first round is a warm-up
                    samples[side].append(elapsed)
    finally:
        if mock is not None:
            mock.stop()
            await mock.aclose()
    return statistics.median(samples["ours"]), statistics.median(samples["sdk"]), problems


def _repeats(turns: int, quick: bool) -> int:
    if quick:
        return 2
    return 61 if turns <= 1 else (9 if turns <= 50 else 3)


async def _run(lengths: Sequence[int], quick: bool) -> Section:
    section = Section(
        "Wrapper overhead: Runner runs of N tool-call turns (N + 1 requests)",
        "ours (ConversationState)",
        "SDK previous_response_id",
    )
    worst = 0.0
    details: dict[str, Any] = {}
    for backend in ("canned", "mock"):
        for streamed in (False, True):
            for turns in lengths:
                ours, sdk, problems = await _time_pair(
                    backend, turns, streamed, _repeats(turns, quick)
                )
                overhead = ours / sdk - 1
                worst = max(worst, overhead)
                name = f"{backend}, {'streamed' if streamed else 'not streamed'}, {turns} turns"
                section.rows.append(
                    Row(name, ours, sdk, "s", note=f"overhead {overhead * 100:+.1f}%")
                )
                details[name] = {"ours_s": ours, "sdk_s": sdk, "overhead": overhead}
                section.checks += [f"{name}: {p}" for p in problems]
    if not any(": " in c and "request" in c for c in section.checks):
        section.checks.append(
            "every run made N + 1 requests; on the mock every chained request carried one item"
        )
    section.notes.append(
        "canned = no-network Model returning ModelResponse objects (CPU cost only); "
        "mock = MockResponsesAPI over an httpx2 MockTransport (HTTP, JSON and SSE parsing included)"
    )
    section.target(
        "wrapper overhead ≤ 5% at every run length",
        worst <= 0.05,
        f"worst {worst * 100:+.1f}%",
    )
    section.details = details
    return section


def run(*, quick: bool = False, lengths: Sequence[int] | None = None) -> Section:
    set_tracing_disabled(True)  # no trace export from a benchmark (and none in its smoke test)
    return asyncio.run(_run(tuple(lengths or (QUICK_LENGTHS if quick else LENGTHS)), quick))


def main() -> None:
    print(run().render())


if __name__ == "__main__":
    main()
