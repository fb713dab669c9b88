"""``ServeSettings``: what ``agents-state-ext serve`` runs, from its options or the environment.

uvicorn starts each worker process from an import string, so the settings travel through
environment variables (:meth:`ServeSettings.to_env` / :meth:`ServeSettings.from_env`); the
app factory ``agents_state_ext.server.app:app_from_env`` builds the app from them in each
worker:

==================================  ============================================================
``AGENTS_STATE_EXT_HOST``           the address the server listens on (``serve`` sets it; under
                                    the ``uvicorn`` command its ``--host`` wins: set this one
                                    where the app cannot see the address, e.g. gunicorn)
``AGENTS_STATE_EXT_ALLOWED_HOSTS``  ``chat.example.com,.example.com``: host names answered
                                    besides loopback and the bound address (others: 421)
``AGENTS_STATE_EXT_STORE``          store URL (``open_store``); default ``agents-state-ext.db``
``AGENTS_STATE_EXT_REDIS``          Redis URL of the stop bus (without: one process only)
``AGENTS_STATE_EXT_TOKENS``         ``alice=SECRET,bob=SECRET``: bearer tokens (without: no auth)
``AGENTS_STATE_EXT_TOKENS_FILE``    a file of ``USER=SECRET`` lines (kept out of ``ps``)
``AGENTS_STATE_EXT_MOCK_URL``       base URL of a mock Responses API server (``.../v1``)
``AGENTS_STATE_EXT_MODEL``          model name (default ``gpt-4.1``)
``AGENTS_STATE_EXT_AGENT``          ``module:attr`` of the ``agents.Agent`` (or a function making
                                    one) that answers; default: a plain assistant
``AGENTS_STATE_EXT_STRATEGY``       strategy of new conversations (default ``previous_response``)
``AGENTS_STATE_EXT_LEASE_TTL``      seconds a conversation's lease lasts unrenewed (default 15)
``AGENTS_STATE_EXT_NAMESPACE``      prefix of the stop bus's Redis channels
``AGENTS_STATE_EXT_BODY_TIMEOUT``   seconds a client gets to send a whole request body
                                    (default 30; then 408)
``AGENTS_STATE_EXT_MAX_MESSAGE``    the largest request body in bytes, a message with its JSON
                                    (default 262144: 256 KiB; bigger is 413)
``OPENAI_API_KEY``                  with it (and no mock URL): the real OpenAI API
==================================  ============================================================

Without an API key or a mock URL each worker answers with an in-process offline mock.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from ..chat import STRATEGIES
from .auth import check_secrets, parse_tokens, read_tokens_file
from .body import BODY_TIMEOUT, MAX_BODY
from .stops import DEFAULT_NAMESPACE

__all__ = ["DEFAULT_STORE", "ENV_PREFIX", "ModelSource", "ServeSettings", "is_loopback"]

ENV_PREFIX = "AGENTS_STATE_EXT_"
DEFAULT_STORE = "agents-state-ext.db"

ModelSource = Literal["openai", "mock-server", "offline"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (reachable from here only)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeSettings:
    """The settings of one ``serve``: where to listen, store, stop bus, users, model."""

    host: str = "127.0.0.1"
    port: int = 8000
    store: str = DEFAULT_STORE
    redis: str | None = None
    workers: int = 1
    tokens: dict[str, str] = field(default_factory=dict, repr=False)
    mock_url: str | None = None
    model: str = "gpt-4.1"
    strategy: str = "previous_response"
    lease_ttl: float = 15.0
    namespace: str = DEFAULT_NAMESPACE
    agent: str | None = None
    """``module:attr`` of the agent that answers (``--agent``); ``None``: a plain assistant."""
    body_timeout: float = BODY_TIMEOUT
    """Seconds a client gets to send a whole request body (then 408)."""
    max_message_bytes: int = MAX_BODY
    """The largest request body in bytes (then 413)."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names answered besides loopback and the bound address (``--allowed-host``)."""
    api_key: bool = field(default=False, repr=False)
    """Whether ``OPENAI_API_KEY`` is set (read by :meth:`from_env`, never stored here)."""

    @property
    def model_source(self) -> ModelSource:
        """Who answers: a mock server (``mock_url``), else OpenAI (a key), else the offline mock."""
        if self.mock_url:
            return "mock-server"
        return "openai" if self.api_key else "offline"

    @property
    def served_hosts(self) -> tuple[str, ...]:
        """The hosts the app answers for besides loopback: the listed ones, the bound address.

        A wildcard bind (``0.0.0.0``, ``::``) stands for every address of the machine: a
        ``Host`` that is an IP address is then answered (a rebinding page has a name, never
        the address itself), names only when listed.
        """
        return (*self.allowed_hosts, self.host)

    def check(self) -> ServeSettings:
        """``self`` if the combination is safe to run, else ``ValueError`` saying why (one line)."""
        if self.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {self.workers}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be 0-65535, got {self.port}")
        check_secrets(self.tokens)
        if not is_loopback(self.host) and not self.tokens:
            raise ValueError(
                f"refusing to listen on {self.host} without --token: anyone who reaches the "
                "port could act as any user; add --token USER=SECRET (or AGENTS_STATE_EXT_TOKENS, "
                "AGENTS_STATE_EXT_TOKENS_FILE) or listen on 127.0.0.1"
            )
        if self.workers > 1 and not self.redis:
            raise ValueError(
                f"--workers {self.workers} needs --redis URL: without it a stop reaches only "
                "the worker that received it, not the one streaming the answer"
            )
        if self.workers > 1 and _in_memory(self.store):
            raise ValueError(
                f"--workers {self.workers} needs a shared store (a SQLite file, PostgreSQL or "
                f"Redis), not {self.store!r}: each worker would have its own"
            )
        if self.workers > 1 and self.model_source == "offline":
            raise ValueError(
                f"--workers {self.workers} without OPENAI_API_KEY needs --mock-url: the workers "
                "must share one mock server"
            )
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}"
            )
        if self.lease_ttl <= 0:
            raise ValueError(f"the lease TTL must be positive, got {self.lease_ttl}")
        if not self.body_timeout > 0:
            raise ValueError(f"the body timeout must be positive, got {self.body_timeout}")
        if self.max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be positive, got {self.max_message_bytes}")
        return self

    def to_env(self) -> dict[str, str]:
        """The environment variables a worker reads these settings back from."""
        env = {
            "STORE": self.store,
            "MODEL": self.model,
            "AGENT": self.agent or "",
            "STRATEGY": self.strategy,
            "LEASE_TTL": repr(self.lease_ttl),
            "BODY_TIMEOUT": repr(self.body_timeout),
            "MAX_MESSAGE": str(self.max_message_bytes),
            "NAMESPACE": self.namespace,
            "REDIS": self.redis or "",
            "MOCK_URL": self.mock_url or "",
            "HOST": self.host,
            "ALLOWED_HOSTS": ",".join(self.allowed_hosts),
            "TOKENS": ",".join(f"{user}={secret}" for user, secret in self.tokens.items()),
        }
        return {ENV_PREFIX + key: value for key, value in env.items()}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServeSettings:
        """The settings in ``environ`` (default ``os.environ``); ``ValueError`` if malformed."""
        env = os.environ if environ is None else environ

        def get(key: str) -> str | None:
            value = env.get(ENV_PREFIX + key, "").strip()
            return value or None

        tokens = parse_tokens(get("TOKENS") or "")
        tokens_file = get("TOKENS_FILE")
        if tokens_file is not None:
            tokens = {**read_tokens_file(tokens_file), **tokens}
        lease_ttl = _number(get("LEASE_TTL"), "LEASE_TTL", cls.lease_ttl)
        body_timeout = _number(get("BODY_TIMEOUT"), "BODY_TIMEOUT", cls.body_timeout)
        max_bytes = get("MAX_MESSAGE")
        if max_bytes is not None and not max_bytes.isdigit():
            raise ValueError(f"{ENV_PREFIX}MAX_MESSAGE must be a whole number, got {max_bytes!r}")
        return cls(
            host=get("HOST") or cls.host,
            allowed_hosts=_split_list(get("ALLOWED_HOSTS") or ""),
            store=get("STORE") or DEFAULT_STORE,
            redis=get("REDIS"),
            tokens=tokens,
            mock_url=get("MOCK_URL"),
            model=get("MODEL") or cls.model,
            agent=get("AGENT"),
            strategy=get("STRATEGY") or cls.strategy,
            lease_ttl=lease_ttl,
            body_timeout=body_timeout,
            max_message_bytes=int(max_bytes) if max_bytes is not None else cls.max_message_bytes,
            namespace=get("NAMESPACE") or DEFAULT_NAMESPACE,
            api_key=bool(env.get("OPENAI_API_KEY", "").strip()),
        )

    def replace(self, **changes: object) -> ServeSettings:
        """A copy with ``changes``."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _number(text: str | None, key: str, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{key} must be a number, got {text!r}") from None


def _split_list(text: str) -> tuple[str, ...]:
    """A comma-separated text as its non-empty, stripped parts."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _in_memory(store: str) -> bool:
    return store in ("memory:", "sqlite://", "sqlite:", ":memory:") or store.startswith("memory:")
