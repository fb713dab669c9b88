"""One conversation under test: the mock, the state, the agent, and a run cut short at a point."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agents import Agent
from agents.result import RunResultBase

from agents_state_ext import ConversationState
from agents_state_ext.stores import InMemoryStore
from agents_state_ext.stores.held import HeldState
from agents_state_ext.testing import Fault, MockResponsesAPI, Responder

from ._interrupt import (
    Held,
    Point,
    Probe,
    ProbeHooks,
    Runtime,
    Way,
    drive,
    install_frame_points,
    response_requests,
)
from ._scripts import Reporter
from ._support import run_turn

__all__ = ["STRATEGIES", "Talk", "fewer_collections"]

STRATEGIES = ("previous_response", "conversation")


@contextlib.contextmanager
def fewer_collections(threshold: int = 50_000) -> Iterator[None]:
    """Run thousands of conversations with fewer garbage-collector passes (~15% less CPU).

    Each run allocates many short-lived objects next to the SDK's large long-lived ones; the
    default gen-0 threshold (700) makes the collector rescan them all the time.
    """
    before = gc.get_threshold()
    gc.set_threshold(threshold, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


LEASE = 30.0
"""The hold of a conversation kept in a store; the test's clock jumps past it on a crash."""


class Clock:
    """A settable clock for the workers' leases."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Talk:
    """A fresh conversation on the mock under one strategy; ``streamed`` may change per run."""

    mock: MockResponsesAPI
    state: ConversationState
    conversation_id: str | None
    streamed: bool
    probe: Probe = field(default_factory=Probe)
    agent: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    ledgers: InMemoryStore | None = None
    worker: HeldState | None = None
    clock: Clock = field(default_factory=Clock)
    late: str | None = None
    """The late user message the app stages at the scripted run's pause, if any."""

    @classmethod
    def open(
        cls,
        mock: MockResponsesAPI,
        strategy: str,
        *,
        streamed: bool,
        responder: Responder,
        agent: Callable[[MockResponsesAPI, Reporter], Agent[Any]],
        run_kwargs: dict[str, Any],
    ) -> Talk:
        """Reset the mock and start a conversation whose runs report to a fresh probe."""
        mock.reset()
        mock.responder = responder
        conversation_id = mock.create_conversation() if strategy == "conversation" else None
        state = (
            ConversationState.conversation(conversation_id)
            if conversation_id is not None
            else ConversationState.previous_response()
        )
        talk = cls(mock, state, conversation_id, streamed)
        talk.agent = agent(mock, talk.probe)
        talk.kwargs = {**run_kwargs, "hooks": ProbeHooks(talk.probe)}
        return talk

    async def turn(self, state: ConversationState, text: str) -> RunResultBase:
        """A plain new turn on ``state``."""
        return await run_turn(state, self.agent, text, streamed=self.streamed, **self.kwargs)

    async def drive(self, state: ConversationState, input: Any, held: Held) -> None:
        """Run ``input`` on ``state`` to its final answer (see :func:`~._interrupt.drive`)."""
        await drive(
            state,
            self.agent,
            input,
            held,
            streamed=self.streamed,
            probe=self.probe,
            late=self.late,
            **self.kwargs,
        )

    async def hold(self) -> None:
        """Keep the ledger in a store from now on, held by worker "a" (saved at every request)."""
        self.ledgers = InMemoryStore()
        self.worker = HeldState(
            self.ledgers, "talk", new=self.state, holder="a", lease=LEASE, clock=self.clock
        )
        await self.worker.__aenter__()

    async def take_over(self, crashed: bool) -> ConversationState:
        """Worker "b" goes on from the store: after "a" left (saving), or died (its hold lapses)."""
        if self.worker is None or self.ledgers is None:
            raise AssertionError("the conversation is not held in a store")
        if crashed:
            await self.worker.abandon()
            self.clock.now += LEASE + 1
        else:
            await self.worker.__aexit__(None, None, None)
        self.worker = HeldState(self.ledgers, "talk", holder="b", lease=LEASE, clock=self.clock)
        return await self.worker.__aenter__()

    async def close(self) -> None:
        """Let go of the store's hold, if any."""
        if self.worker is not None:
            await self.worker.abandon()
            self.worker = None

    def transcript(self, final: RunResultBase) -> list[dict[str, Any]]:
        """What the model saw: the conversation's items, or the chain of ``final``'s response."""
        if self.conversation_id is not None:
            return self.mock.conversation_items(self.conversation_id)
        if final.last_response_id is None:
            raise AssertionError("the follow-up produced no response id")
        return self.mock.transcript(final.last_response_id)

    async def interrupted(self, input: str, held: Held, way: Way | None, point: Point) -> None:
        """Run ``input`` to its end, stopped early by ``way`` at ``point``; ``held`` records how.

        Afterwards ``held.notes`` says if the point was never reached or the fault never used.
        """
        mock = self.mock
        install_frame_points(mock, self.probe, len(response_requests(mock)))
        runtime = Runtime(self.state, held, probe=self.probe)
        self.probe.arm(None, None)
        if way is not None and way.fault is not None and point.request is not None:
            for _ in range(point.request):
                mock.inject(Fault.delay(0))
            mock.inject(way.fault(point.after_events))
        elif way is not None and way.action is not None:
            action = way.action
            self.probe.arm(point.probe, lambda: action(runtime))
        task = asyncio.create_task(self.drive(self.state, input, held))
        runtime.task = task
        await asyncio.wait([task])
        held.cancelled = task.cancelled()
        held.error = None if held.cancelled else task.exception()
        await _settled(held)
        self.probe.disarm()
        self.probe.dead = False
        mock.frame_hook = None
        if way is not None and way.action is not None and self.probe.fired is None:
            held.notes.append(f"point {point.label!r} was never reached")
        if mock.clear_faults():
            held.notes.append(f"the fault for {point.label!r} was never used")


async def _settled(held: Held) -> None:
    """Wait until a streamed run's background task has ended (cancelled runs clean up late)."""
    task = getattr(held.result, "run_loop_task", None)
    if task is not None and not task.done():
        await asyncio.wait([task], timeout=5)
    await asyncio.sleep(0)
