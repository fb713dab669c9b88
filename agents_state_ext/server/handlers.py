"""``ChatServer``: the handlers behind the routes, one worker serving a store's conversations.

Each handler finds the user (:mod:`.auth`), refuses a conversation that is not theirs as
unknown (404), opens the conversation from the store for this one request, and leaves every
change to the :class:`~.driver.Driver` (lease, stop bus, recovery).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agents import Agent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._graph import default_id_factory
from .._housekeeping import delete_conversation
from ..chat import STRATEGIES, Attempt, Conversation, check_budget, open_conversation
from ..errors import (
    ConversationNotFoundError,
    StoredDataError,
    StoreError,
    StoreUnavailableError,
)
from ..stores import ConversationStore, export_conversation
from .auth import TokenAuth
from .body import BODY_TIMEOUT, MAX_BODY, Body, read_body
from .driver import Driver, OpenChat
from .events import RETRY_AFTER
from .leases import LeaseManager
from .stops import StopBus
from .views import conversation_view, diff_view, node_view, tree_view

__all__ = ["AgentFactory", "ChatServer"]

AgentFactory = Callable[[str, str], "Agent[Any] | Awaitable[Agent[Any]]"]
"""``factory(user, conversation_id)``: the agent that answers that user's conversation."""

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

HEALTH_TIMEOUT = 5.0
"""Seconds ``/api/health`` waits for the store's answer before it reports it unavailable."""
_PROBE_ID = "health-probe"  # a conversation id the probe looks up; it need not exist

logger = logging.getLogger(__name__)


def _unreadable(error: Exception) -> bool:
    """Whether ``error`` says a row holds what cannot be decoded (the store itself answered).

    A meta that is not JSON (``ValueError``) or not an object (the codec's ``StoreError``), a
    field of the wrong type (``TypeError``); not a ``StoreError`` that wraps the database's
    own failure (a lost connection must fail the listing, not empty it).
    """
    if isinstance(error, StoreUnavailableError):
        return False
    if isinstance(error, StoredDataError):
        return True
    if isinstance(error, StoreError):
        return error.__cause__ is None or isinstance(error.__cause__, (ValueError, TypeError))
    return isinstance(error, (ValueError, TypeError))


class ChatServer:
    """The handlers behind the routes: one worker serving conversations of a store."""

    def __init__(
        self,
        *,
        store: ConversationStore,
        agent: Agent[Any] | None,
        agent_factory: AgentFactory | None,
        stop_bus: StopBus,
        leases: LeaseManager,
        auth: TokenAuth,
        strategy: str,
        chat_options: Mapping[str, Any],
        stop_timeout: float,
        keep_alive: float,
        trust_client_items: bool = False,
        body_timeout: float | None = BODY_TIMEOUT,
        max_message_bytes: int = MAX_BODY,
    ) -> None:
        self.store = store
        self.auth = auth
        self.strategy = strategy
        self.driver = Driver(store, leases, stop_bus, stop_timeout=stop_timeout)
        self._agent = agent
        self._agent_factory = agent_factory
        self._options = dict(chat_options)
        self._keep_alive = keep_alive
        self._any_items = trust_client_items
        self._body_timeout = body_timeout
        self._max_body = max_message_bytes

    @property
    def worker_id(self) -> str:
        """This worker's id, also sent as the ``X-Worker-Id`` header of every answer."""
        return self.driver.worker_id

    async def aclose(self) -> None:
        """Stop the attempts this worker streams (stored as ``cancelled``) and wait for them."""
        await self.driver.aclose()

    # -- helpers -------------------------------------------------------------------------------

    async def _owned(self, request: Request) -> tuple[str, str]:
        """The user and the conversation of a request; 404 unless that user owns it."""
        user = await self.auth.user(request)
        conversation_id = request.path_params["conversation_id"]
        try:
            info = await self.store.get_conversation(conversation_id)
        except ConversationNotFoundError:
            info = None
        if info is None or info.meta.get("owner") != user:  # not yours reads as unknown
            raise ConversationNotFoundError(f"no conversation {conversation_id!r}")
        return user, conversation_id

    async def _body(self, request: Request) -> Body:
        return await read_body(request, timeout=self._body_timeout, limit=self._max_body)

    def _opener(self, user: str, *, answering: bool = False) -> OpenChat:
        async def open_chat(conversation_id: str) -> Conversation:
            agent = await self._agent_for(user, conversation_id) if answering else None
            return await open_conversation(
                self.store, conversation_id, agent=agent, create=False, **self._options
            )

        return open_chat

    async def _agent_for(self, user: str, conversation_id: str) -> Agent[Any]:
        if self._agent_factory is None:
            assert self._agent is not None
            return self._agent
        agent = self._agent_factory(user, conversation_id)
        return agent if isinstance(agent, Agent) else await agent

    async def _read(self, request: Request) -> Conversation:
        user, conversation_id = await self._owned(request)
        return await self._opener(user)(conversation_id)

    async def _answer(
        self, user: str, conversation_id: str, act: Callable[[Conversation], Attempt]
    ) -> Response:
        """Start ``act(chat)`` under the lease; its answer as an SSE stream."""
        run = await self.driver.start(conversation_id, self._opener(user, answering=True), act)
        return StreamingResponse(
            run.stream(keep_alive_every=self._keep_alive),
            media_type="text/event-stream",
            headers=_SSE_HEADERS,
        )

    # -- conversations -------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """``{status, store, stop_bus, worker_id}``: 503 and ``degraded`` when one is down.

        ``store`` is ``unavailable`` when a lookup of an unknown conversation gets no answer
        within :data:`HEALTH_TIMEOUT` seconds (or fails as unavailable); ``stop_bus`` is
        ``down`` when stops would not reach this worker, ``unavailable`` when a bus that can
        be pinged (``RedisStopBus``) does not answer.
        """
        store = await self._store_health()
        stop_bus = await self._stop_bus_health()
        degraded = store != "ok" or stop_bus != "ok"
        body = {
            "status": "degraded" if degraded else "ok",
            "store": store,
            "stop_bus": stop_bus,
            "worker_id": self.worker_id,
        }
        headers = {"Retry-After": str(RETRY_AFTER)} if degraded else None
        return JSONResponse(body, status_code=503 if degraded else 200, headers=headers)

    async def _stop_bus_health(self) -> str:
        stops = self.driver.stops
        if not getattr(stops, "alive", True):
            return "down"
        ping = getattr(stops, "ping", None)
        if ping is not None:
            try:
                await asyncio.wait_for(ping(), HEALTH_TIMEOUT)
            except (StoreUnavailableError, asyncio.TimeoutError):
                return "unavailable"
        return "ok"

    async def _store_health(self) -> str:
        try:
            await asyncio.wait_for(self.store.get_conversation(_PROBE_ID), HEALTH_TIMEOUT)
        except ConversationNotFoundError:
            return "ok"
        except (StoreUnavailableError, asyncio.TimeoutError):
            return "unavailable"
        except Exception:  # answered, but not as a store should: report it, keep serving
            logger.exception("the store's health probe failed")
            return "failing"
        return "ok"

    async def create(self, request: Request) -> Response:
        user = await self.auth.user(request)
        body = await self._body(request)
        strategy = body.text("strategy", default=self.strategy)
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
            )
        budget = check_budget(body.get("budget"))
        system = body.text("system", default=None)
        conversation_id = default_id_factory("chat")
        try:
            chat = await open_conversation(
                self.store,
                conversation_id,
                strategy=strategy,
                system=system,
                budget=budget,
                **self._options,
            )
            await self.store.update_conversation_meta(chat.id, {"owner": user})
        except BaseException:
            await self._discard(conversation_id)  # a refused create leaves nothing behind
            raise
        return JSONResponse(
            {"id": chat.id, "strategy": chat.strategy, "budget": chat.budget}, status_code=201
        )

    async def _discard(self, conversation_id: str) -> None:
        """Delete what a failed create wrote of ``conversation_id`` (nothing, if it wrote none)."""
        try:
            await delete_conversation(self.store, conversation_id)
        except ConversationNotFoundError:
            pass
        except Exception:
            logger.exception("a refused create left conversation %s behind", conversation_id)

    async def list(self, request: Request) -> Response:
        user = await self.auth.user(request)
        mine, broken = [], []
        for conversation_id in await self.store.list_conversations():
            try:
                info = await self.store.get_conversation(conversation_id)
            except ConversationNotFoundError:
                continue  # deleted meanwhile
            except Exception as exc:
                if not _unreadable(exc):
                    raise
                broken.append(conversation_id)  # whose it is cannot be read: nobody's listing
                continue
            if info.meta.get("owner") == user:
                mine.append(
                    {"id": info.id, "strategy": info.strategy, "created_at": info.created_at}
                )
        if broken:
            logger.warning(
                "%d conversation row(s) could not be read and were left out of a listing: %s",
                len(broken),
                ", ".join(broken),
            )
        return JSONResponse({"conversations": mine, "broken": len(broken)})

    async def show(self, request: Request) -> Response:
        return JSONResponse(conversation_view(await self._read(request)))

    async def delete(self, request: Request) -> Response:
        _, conversation_id = await self._owned(request)
        leases = self.driver.leases
        async with leases.hold(conversation_id):
            await delete_conversation(self.store, conversation_id)
        await leases.forget(conversation_id)
        return JSONResponse({"deleted": conversation_id})

    async def export(self, request: Request) -> Response:
        _, conversation_id = await self._owned(request)
        return JSONResponse(await export_conversation(self.store, conversation_id))

    # -- answering -----------------------------------------------------------------------------

    async def send(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        body = await self._body(request)
        content, stream = (
            body.content("content", any_items=self._any_items),
            body.flag("stream", True),
        )
        return await self._answer(
            user, conversation_id, lambda chat: chat.send(content, stream=stream)
        )

    async def retry(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        body = await self._body(request)
        user_id, stream = body.text("user_id", default=None), body.flag("stream", True)
        return await self._answer(
            user, conversation_id, lambda chat: chat.retry(user_id, stream=stream)
        )

    async def edit(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        body = await self._body(request)
        user_id, content = body.text("user_id"), body.content("content", any_items=self._any_items)
        stream = body.flag("stream", True)
        return await self._answer(
            user, conversation_id, lambda chat: chat.edit(user_id, content, stream=stream)
        )

    async def resume(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        stream = (await self._body(request)).flag("stream", True)
        return await self._answer(user, conversation_id, lambda chat: chat.resume(stream=stream))

    async def approvals(self, request: Request) -> Response:
        chat = await self._read(request)
        return JSONResponse({"approvals": [a.to_dict() for a in await chat.pending_approvals()]})

    async def decide(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        body = await self._body(request)
        decision = body.text("decision")
        if decision not in ("approved", "rejected"):
            raise ValueError(f"decision is 'approved' or 'rejected', got {decision!r}")
        call_id = body.text("call_id", default=None)
        always = body.flag("always", False)
        message = body.text("message", default=None)
        async with self.driver.session(conversation_id, self._opener(user)) as chat:
            if decision == "approved":
                decided = await chat.approve(call_id, always=always)
            else:
                decided = await chat.reject(call_id, message=message, always=always)
        return JSONResponse({"approvals": [a.to_dict() for a in decided]})

    async def stop(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        record = await self.driver.stop(conversation_id, self._opener(user))
        return JSONResponse(record.to_dict())

    async def switch(self, request: Request) -> Response:
        user, conversation_id = await self._owned(request)
        node_id = (await self._body(request)).text("node_id")
        async with self.driver.session(conversation_id, self._opener(user)) as chat:
            await chat.switch(node_id)
            path = [node_view(n, chat.graph) for n in chat.active_path()]
        return JSONResponse({"active_leaf": chat.graph.active_leaf, "active_path": path})

    async def budget(self, request: Request) -> Response:
        """Set the conversation's token budget (``{"budget": N}``, ``null``: none) for what follows.

        The way on after a 422 over the budget, besides a shorter message.
        """
        user, conversation_id = await self._owned(request)
        budget = check_budget((await self._body(request)).get("budget"))
        async with self.driver.session(conversation_id, self._opener(user)) as chat:
            await chat.set_budget(budget)
        return JSONResponse({"id": conversation_id, "budget": budget})

    # -- reading -------------------------------------------------------------------------------

    async def tree(self, request: Request) -> Response:
        return JSONResponse(tree_view(await self._read(request)))

    async def attempts(self, request: Request) -> Response:
        chat = await self._read(request)
        message_id = request.query_params.get("message_id")
        return JSONResponse({"attempts": [r.to_dict() for r in await chat.attempts(message_id)]})

    async def attempt(self, request: Request) -> Response:
        chat = await self._read(request)
        return JSONResponse((await chat.record(request.path_params["ref"])).to_dict())

    async def explain(self, request: Request) -> Response:
        chat = await self._read(request)
        first, second = request.query_params.get("a"), request.query_params.get("b")
        if not first or not second:
            raise ValueError("explain needs two attempts: ?a=ID&b=ID (attempt or message ids)")
        return JSONResponse(diff_view(await chat.explain(first, second)))
