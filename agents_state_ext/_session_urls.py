"""Agents SDK sessions named by a URL, for ``agents-state-ext import --from-session`` / ``export
--to-session``.

- ``sqlite:///relative.db?session_id=ID`` or ``sqlite:////abs/path.db?session_id=ID`` (as a
  store URL names a file): ``SQLiteSession(ID, path)``;
- ``redis://host:6379/0?session_id=ID`` (``rediss://`` too; ``key_prefix=`` optional):
  ``RedisSession.from_url`` (needs the ``redis`` package);
- ``sqlalchemy+<an SQLAlchemy async URL>?session_id=ID``, e.g.
  ``sqlalchemy+postgresql+psycopg://user@host/db?session_id=ID``:
  ``SQLAlchemySession.from_url(..., create_tables=True)`` (needs ``sqlalchemy`` and the URL's
  async driver);
- ``openai-conversation://CONVERSATION_ID``: ``OpenAIConversationsSession`` on the default
  ``AsyncOpenAI()`` client (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode

__all__ = ["SESSION_URL_FORMS", "open_session"]

SESSION_URL_FORMS = (
    "sqlite:///PATH.db?session_id=ID",  # sqlite:////abs/path.db for an absolute path
    "redis://HOST:PORT/DB?session_id=ID",
    "sqlalchemy+DRIVER_URL?session_id=ID",
    "openai-conversation://CONVERSATION_ID",
)


def _split(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its query, and the query's parameters."""
    base, _, query = url.partition("?")
    return base, dict(parse_qsl(query, keep_blank_values=True))


def _session_id(url: str, query: dict[str, str]) -> str:
    session_id = query.pop("session_id", "")
    if not session_id:
        raise ValueError(f"{url}: add ?session_id=ID, the SDK session to read or write")
    return session_id


def _needs(module: str, url: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise ValueError(f"{url} needs the {module!r} package: pip install {module}") from None


def _build(url: str) -> Any:
    if url.startswith("sqlite://"):
        from agents import SQLiteSession

        base, query = _split(url)
        path = base.removeprefix("sqlite:///")
        if not path or path == base:
            raise ValueError(f"{url}: name the file, sqlite:///relative.db or sqlite:////abs.db")
        return SQLiteSession(_session_id(url, query), path)
    if url.startswith(("redis://", "rediss://")):
        _needs("redis", url)
        from agents.extensions.memory.redis_session import RedisSession

        base, query = _split(url)
        session_id = _session_id(url, query)
        prefix = query.pop("key_prefix", None)
        kept = base + ("?" + urlencode(query) if query else "")
        extra: dict[str, Any] = {"key_prefix": prefix} if prefix else {}
        return RedisSession.from_url(session_id, url=kept, **extra)
    if url.startswith("sqlalchemy+"):
        _needs("sqlalchemy", url)
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        base, query = _split(url.removeprefix("sqlalchemy+"))
        session_id = _session_id(url, query)
        kept = base + ("?" + urlencode(query) if query else "")
        return SQLAlchemySession.from_url(session_id, url=kept, create_tables=True)
    if url.startswith("openai-conversation://"):
        from agents import OpenAIConversationsSession

        conversation_id = url.removeprefix("openai-conversation://").strip("/")
        if not conversation_id:
            raise ValueError(f"{url}: name the conversation, openai-conversation://conv_...")
        return OpenAIConversationsSession(conversation_id=conversation_id)
    raise ValueError(f"unknown session URL {url!r}; one of: {', '.join(SESSION_URL_FORMS)}")


async def _close(session: Any) -> None:
    engine = getattr(session, "engine", None)
    if engine is not None and hasattr(engine, "dispose"):
        await engine.dispose()
        return
    close = getattr(session, "close", None)
    if close is None:
        return
    result = close()
    if inspect.isawaitable(result):
        await result


@contextlib.asynccontextmanager
async def open_session(url: str) -> AsyncIterator[Any]:
    """The SDK session ``url`` names (see the module docstring), closed on exit.

    ``ValueError`` for an unknown form, a missing ``session_id`` or a missing package.
    """
    session = _build(url)
    try:
        yield session
    finally:
        await _close(session)
