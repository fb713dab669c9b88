"""What a ``serve`` worker opens from its settings: the store, the stop bus, the agent."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents import Agent, OpenAIResponsesModel, set_tracing_disabled

from ..stores import ConversationStore, open_store
from .config import ServeSettings
from .stops import LocalStopBus, RedisStopBus, StopBus

if TYPE_CHECKING:
    from ..testing import Reply, ResponseContext

__all__ = ["Resources", "new_worker_id", "offline_reply", "open_resources"]

OFFLINE_DELAY = 0.05
"""Seconds between the offline mock's streamed words: slow enough to press stop."""


def new_worker_id() -> str:
    """A worker id unique among live workers: host, process id and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def offline_reply(context: ResponseContext) -> Reply:
    """The offline mock's answer: the user's words echoed back, streamed word by word."""
    from ..testing import Reply

    said = context.last_user_text or ""
    text = f"(offline mock) You said: {said}. Set OPENAI_API_KEY to talk to a real model."
    words = text.split(" ")
    chunks = [w + " " for w in words[:-1]] + [words[-1]]
    return Reply.text(text, chunks=chunks, delay=OFFLINE_DELAY)


@dataclass
class Resources:
    """What one worker serves with."""

    store: ConversationStore
    stop_bus: StopBus
    agent: Agent[Any]
    model_source: str


@contextlib.asynccontextmanager
async def open_resources(settings: ServeSettings) -> AsyncIterator[Resources]:
    """Open the store, the stop bus and the agent of ``settings``; close them on exit."""
    set_tracing_disabled(True)  # no trace upload from a server that may run offline
    async with contextlib.AsyncExitStack() as stack:
        store = await open_store(settings.store)
        stack.push_async_callback(store.aclose)
        if settings.redis:
            bus: StopBus = await RedisStopBus.connect(settings.redis, namespace=settings.namespace)
        else:
            bus = LocalStopBus()
        stack.push_async_callback(bus.aclose)
        agent = await stack.enter_async_context(_agent(settings))
        yield Resources(store, bus, agent, settings.model_source)


@contextlib.asynccontextmanager
async def _agent(settings: ServeSettings) -> AsyncIterator[Agent[Any]]:
    """The agent of ``settings.agent`` (default: a plain assistant) on the settings' model."""
    from .._agent_spec import bind_model, load_agent  # the one loader ``--agent`` uses

    own = load_agent(settings.agent) if settings.agent else None
    source = settings.model_source
    if source == "offline":
        from ..testing import MockResponsesAPI  # the kit loads only for the offline model

        async with MockResponsesAPI(model=settings.model) as mock:
            mock.responder = offline_reply
            model = mock.model(settings.model)
            if own is not None:  # offline, the user's agent (tools, instructions) on the mock
                yield own.clone(model=model)
            else:
                yield Agent(name="assistant", model=model)
        return
    from openai import AsyncOpenAI

    if source == "mock-server":
        client = AsyncOpenAI(api_key="sk-mock", base_url=settings.mock_url, max_retries=0)
    else:
        client = AsyncOpenAI()
    try:
        if own is not None:
            yield bind_model(own, settings.model, client)
        else:
            yield Agent(
                name="assistant",
                model=OpenAIResponsesModel(model=settings.model, openai_client=client),
            )
    finally:
        await client.close()
