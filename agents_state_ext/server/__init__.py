"""The chat layer served over HTTP: ``create_app`` (Starlette) and what it runs on.

- :func:`create_app`: the ASGI app, to mount in your own Starlette / FastAPI app with your own
  agent and store; ``agents-state-ext serve`` runs it on uvicorn (:func:`app_from_env`).
- :class:`LeaseManager`: at most one worker drives a conversation at a time
  (:class:`ConversationBusyError`, HTTP 409, for a second one).
- :class:`LocalStopBus` / :class:`RedisStopBus`: a stop asked on any worker reaches the worker
  that streams the answer.
- :func:`close_interrupted`: what a dead worker left in flight is closed as interrupted.
- :class:`ServeSettings`: the settings of ``serve``, from its options or the environment.

Nothing else in the package imports this one: Starlette loads only when you serve.
"""

from __future__ import annotations

from .app import ROUTES, AgentFactory, ChatServer, app_from_env, app_from_settings, create_app
from .auth import DEFAULT_USER, USER_HEADER, Identify, TokenAuth, parse_tokens
from .config import ServeSettings
from .events import EVENT_NAMES, HTTPError, ServerEvent
from .leases import ConversationBusyError, Lease, LeaseLostError, LeaseManager
from .recovery import close_interrupted
from .stops import LocalStopBus, RedisStopBus, StopBus, StopWatch

__all__ = [
    "DEFAULT_USER",
    "EVENT_NAMES",
    "ROUTES",
    "USER_HEADER",
    "AgentFactory",
    "ChatServer",
    "ConversationBusyError",
    "HTTPError",
    "Identify",
    "Lease",
    "LeaseLostError",
    "LeaseManager",
    "LocalStopBus",
    "RedisStopBus",
    "ServeSettings",
    "ServerEvent",
    "StopBus",
    "StopWatch",
    "TokenAuth",
    "app_from_env",
    "app_from_settings",
    "close_interrupted",
    "create_app",
    "parse_tokens",
]

__doc__ = (__doc__ or "") + (
    "\n\nRoutes (method, path, handler; ``agents-state-ext serve`` serves them):\n\n"
    + "\n".join(f"    {method:<7}{path}  ({name})" for method, path, name in ROUTES)
    + "\n\nThe settings and their ``AGENTS_STATE_EXT_*`` variables: "
    "``python -m pydoc agents_state_ext.server.config``.\n"
)
