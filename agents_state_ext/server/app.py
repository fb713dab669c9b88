"""``create_app``: the chat layer over HTTP, as a Starlette app (answers stream as SSE).

Mount it in your own Starlette or FastAPI app with your own agent and store::

    app.mount("/chat", create_app(store=store, agent=agent, tokens={"alice": secret}))

or let ``agents-state-ext serve`` run it on uvicorn (``app_from_env`` builds it in each worker
from :class:`~.config.ServeSettings`). Every request opens the conversation from the store;
every change runs under the conversation's lease (:mod:`.driver`), so any worker serves any
request and a second driver gets 409. The routes are in :data:`ROUTES`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from agents import Agent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..chat import STRATEGIES
from ..stores import ConversationStore
from . import readiness
from .auth import Identify, TokenAuth
from .body import BODY_TIMEOUT, MAX_BODY
from .config import ServeSettings
from .events import RETRY_AFTER, error_body, error_status
from .guard import RequestGuard
from .handlers import AgentFactory, ChatServer
from .launch import uvicorn_host
from .leases import LeaseManager
from .pages import page_routes
from .runtime import new_worker_id, open_resources
from .stops import LocalStopBus, StopBus

__all__ = [
    "ROUTES",
    "AgentFactory",
    "ChatServer",
    "app_from_env",
    "app_from_settings",
    "create_app",
]

logger = logging.getLogger(__name__)

_CONVERSATION = "/api/conversations/{conversation_id}"
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("GET", "/api/health", "health"),
    ("POST", "/api/conversations", "create"),
    ("GET", "/api/conversations", "list"),
    ("GET", _CONVERSATION, "show"),
    ("DELETE", _CONVERSATION, "delete"),
    ("GET", _CONVERSATION + "/export", "export"),
    ("POST", _CONVERSATION + "/messages", "send"),
    ("POST", _CONVERSATION + "/retry", "retry"),
    ("POST", _CONVERSATION + "/edit", "edit"),
    ("POST", _CONVERSATION + "/resume", "resume"),
    ("GET", _CONVERSATION + "/approvals", "approvals"),
    ("POST", _CONVERSATION + "/approvals", "decide"),
    ("POST", _CONVERSATION + "/stop", "stop"),
    ("POST", _CONVERSATION + "/switch", "switch"),
    ("POST", _CONVERSATION + "/budget", "budget"),
    ("GET", _CONVERSATION + "/tree", "tree"),
    ("GET", _CONVERSATION + "/attempts", "attempts"),
    ("GET", _CONVERSATION + "/attempts/{ref}", "attempt"),
    ("GET", _CONVERSATION + "/explain", "explain"),
)
"""Every route: (method, path, :class:`ChatServer` handler name)."""


def _endpoint(get: Callable[[], ChatServer], name: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        server = get()
        try:
            response: Response = await getattr(server, name)(request)
        except Exception as exc:
            status = error_status(exc)
            if status == 500:
                logger.exception("%s %s failed", request.method, request.url.path)
            response = JSONResponse(error_body(exc), status_code=status)
            if status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            elif status == 503:
                response.headers["Retry-After"] = str(RETRY_AFTER)
            elif status == 408:  # the rest of the body may still come: not on this connection
                response.headers["Connection"] = "close"
        response.headers["X-Worker-Id"] = server.worker_id
        return response

    return endpoint


def _routes(get: Callable[[], ChatServer]) -> list[Route]:
    return [Route(path, _endpoint(get, name), methods=[method]) for method, path, name in ROUTES]


async def _routing_error(request: Request, exc: Exception) -> Response:
    """An unknown path (404) or method (405), as JSON like every other error."""
    assert isinstance(exc, StarletteHTTPException)
    kind = "NotFound" if exc.status_code == 404 else "MethodNotAllowed"
    body = {
        "error": {"type": kind, "message": f"{exc.detail}: {request.method} {request.url.path}"}
    }
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def _starlette(
    routes: list[Route], lifespan: Any, *, allowed_hosts: Iterable[str], local_only: bool
) -> Starlette:
    guard = Middleware(RequestGuard, allowed_hosts=tuple(allowed_hosts), local_only=local_only)
    app = Starlette(
        routes=[*routes, *page_routes()],
        lifespan=lifespan,
        exception_handlers={StarletteHTTPException: _routing_error},
        middleware=[guard],
    )
    # A slash redirect would build its Location from the request's Host: answer 404 instead.
    app.router.redirect_slashes = False
    return app


def create_app(
    *,
    store: ConversationStore,
    agent: Agent[Any] | None = None,
    agent_factory: AgentFactory | None = None,
    stop_bus: StopBus | None = None,
    leases: LeaseManager | None = None,
    tokens: Mapping[str, str] | None = None,
    identify: Identify | None = None,
    worker_id: str | None = None,
    lease_ttl: float = 15.0,
    strategy: str = "previous_response",
    chat_options: Mapping[str, Any] | None = None,
    stop_timeout: float = 10.0,
    keep_alive: float = 15.0,
    allowed_hosts: Iterable[str] = (),
    trust_client_items: bool = False,
    body_timeout: float | None = BODY_TIMEOUT,
    max_message_bytes: int = MAX_BODY,
) -> Starlette:
    """The chat API over ``store``, answered by ``agent`` (or ``agent_factory(user, id)``).

    ``store`` must keep leases (every shipped store does); you open and close it. Several
    workers or processes serving one store need a shared ``stop_bus``
    (:class:`~.stops.RedisStopBus`; default :class:`~.stops.LocalStopBus`, one process) and
    distinct ``worker_id`` (default: host, pid and a random part). ``leases`` defaults to a
    :class:`~.leases.LeaseManager` with ``lease_ttl``. ``tokens`` (user -> secret) require a
    bearer token on every request; ``identify(request) -> user id`` replaces that with your
    own authentication. ``strategy`` is the default of new conversations;
    ``chat_options`` go to every ``open_conversation`` (``counter``, ``runner_kwargs``, ...).
    ``stop_timeout`` bounds how long a stop waits for another worker; ``keep_alive`` is the
    seconds between SSE keep-alive comments while an answer is silent.

    Only requests for loopback hosts and ``allowed_hosts`` (names your users reach the app by:
    ``chat.example.com``, ``.example.com`` with subdomains, ``*`` when a proxy in front checks
    ``Host``) are answered, others are 421; writes from a foreign ``Origin`` are 403, bodies
    other than JSON 415 (:mod:`.guard`). Without ``tokens`` and ``identify`` only requests
    that arrive on a loopback address, not forwarded by a proxy, are answered. A message sent
    as input items may hold user messages only, unless ``trust_client_items`` (then any item,
    ``system`` and ``developer`` roles and tool outputs too: for clients you trust as much as
    your config). A request body must arrive whole within ``body_timeout`` seconds (else 408
    and the connection is closed; ``None``: no limit) and hold at most ``max_message_bytes``
    (else 413; default 256 KiB: a worker's event loop copies and counts a message, so a bigger
    one stalls the worker's other requests for longer).

    The app's lifespan stops what still streams at shutdown; mounted in another app (whose
    lifespan runs instead) call ``await app.state.chat_server.aclose()`` from yours.
    """
    if (agent is None) == (agent_factory is None):
        raise ValueError("create_app needs exactly one of agent= or agent_factory=")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if leases is None:
        leases = LeaseManager(store, worker_id=worker_id or new_worker_id(), ttl=lease_ttl)
    elif worker_id is not None and worker_id != leases.worker_id:
        raise ValueError(f"worker_id {worker_id!r} differs from the leases' {leases.worker_id!r}")
    server = ChatServer(
        store=store,
        agent=agent,
        agent_factory=agent_factory,
        stop_bus=stop_bus or LocalStopBus(),
        leases=leases,
        auth=TokenAuth(tokens, identify=identify),
        strategy=strategy,
        chat_options=chat_options or {},
        stop_timeout=stop_timeout,
        keep_alive=keep_alive,
        trust_client_items=trust_client_items,
        body_timeout=body_timeout,
        max_message_bytes=max_message_bytes,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await server.aclose()

    app = _starlette(
        _routes(lambda: server),
        lifespan,
        allowed_hosts=allowed_hosts,
        local_only=not tokens and identify is None,
    )
    app.state.chat_server = server
    return app


def app_from_settings(settings: ServeSettings) -> Starlette:
    """The app ``serve`` runs: its lifespan opens the store, stop bus and model of ``settings``."""
    settings.check()
    holder: list[ChatServer] = []

    def get() -> ChatServer:
        if not holder:
            raise RuntimeError("the app is not started (its lifespan opens the store)")
        return holder[0]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_resources(settings) as resources:
            inner = create_app(
                store=resources.store,
                agent=resources.agent,
                stop_bus=resources.stop_bus,
                tokens=settings.tokens,
                lease_ttl=settings.lease_ttl,
                strategy=settings.strategy,
                body_timeout=settings.body_timeout,
                max_message_bytes=settings.max_message_bytes,
            )
            server: ChatServer = inner.state.chat_server
            holder.append(server)
            app.state.chat_server = server
            logger.info(
                "worker %s serving %s, model: %s",
                server.worker_id,
                _redacted(settings.store),
                resources.model_source,
            )
            readiness.announce(server.worker_id)
            try:
                yield
            finally:
                readiness.withdraw()
                await server.aclose()
                holder.clear()

    return _starlette(
        _routes(get),
        lifespan,
        allowed_hosts=settings.served_hosts,
        local_only=not settings.tokens,
    )


def app_from_env() -> Starlette:
    """The app of the settings in the environment (see :mod:`.config`): uvicorn's factory.

    ``uvicorn --factory agents_state_ext.server.app:app_from_env --workers 4`` runs what
    ``agents-state-ext serve`` runs. Under the ``uvicorn`` command its ``--host`` is the
    address checked and served (:mod:`.launch`), whatever ``AGENTS_STATE_EXT_HOST`` says: a
    non-loopback one without tokens is refused here, before anything listens.
    """
    settings = ServeSettings.from_env()
    host = uvicorn_host()
    return app_from_settings(settings if host is None else settings.replace(host=host))


def _redacted(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
