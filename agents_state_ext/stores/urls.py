"""``open_store(url)``: the store a URL names, with the optional backends loaded on demand.

==========================  =================================================
``sqlite:///relative.db``   :class:`SQLiteStore` on a file relative to the working directory
``sqlite:////abs/path.db``  :class:`SQLiteStore` on an absolute path
``sqlite://``               :class:`SQLiteStore` in memory
a plain path                :class:`SQLiteStore` on that file
``postgresql://…``          ``await PostgresStore.connect(url, **options)`` (also ``postgres://``)
``redis://…``               ``await RedisStore.connect(url, **options)`` (also ``rediss://``)
``memory:``                 :class:`InMemoryStore`
==========================  =================================================

PostgreSQL and Redis need their extras (``pip install "agents-state-ext[postgres]"`` /
``[redis]``); without the driver, ``open_store`` is a ``StoreError`` saying which to install.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import StoreError
from .base import ConversationStore
from .memory import InMemoryStore
from .sqlite import SQLiteStore

__all__ = ["load_backend", "open_store"]

# backend module -> (the extra that installs its driver, the driver's top-level modules)
_DRIVERS = {
    "postgres": ("postgres", ("psycopg", "psycopg_pool")),
    "redis": ("redis", ("redis",)),
}


class _MissingDriver(ImportError):
    """An optional backend's driver is not installed; the message says which extra to add."""


async def open_store(url: str | os.PathLike[str], **options: Any) -> ConversationStore:
    """Open the store ``url`` names (see the module docs); ``options`` go to the backend.

    An unknown scheme, or a backend whose driver is missing, is ``StoreError``. Close the
    store with ``await store.aclose()``.
    """
    text = os.fspath(url)
    scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if text == "memory:" or scheme == "memory":
        return InMemoryStore(**options)
    if scheme == "sqlite" or (scheme is None and text.startswith("sqlite:")):
        return SQLiteStore.from_url(text, **options)
    if scheme is None:
        return SQLiteStore(text, **options)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return await _connect("postgres", "PostgresStore", text, options)
    if scheme in ("redis", "rediss"):
        return await _connect("redis", "RedisStore", text, options)
    # The URL itself is left out of the message: it may hold a password.
    raise StoreError(
        f"unknown store URL scheme {scheme!r}: use sqlite:///file.db, postgresql://…,"
        " redis://… or memory:"
    )


async def _connect(module: str, name: str, url: str, options: dict[str, Any]) -> ConversationStore:
    try:
        backend = load_backend(module, name)
        store: ConversationStore = await backend.connect(url, **options)
        return store
    except _MissingDriver as exc:
        raise StoreError(str(exc)) from exc
    except ImportError as exc:  # a driver the backend imports only when connecting
        if _is_driver(module, exc):
            raise StoreError(_install_hint(module, name)) from exc
        raise


def load_backend(module: str, name: str) -> Any:
    """The class ``name`` of ``agents_state_ext.stores.<module>``.

    A missing driver is an ``ImportError`` that says which extra to install.
    """
    try:
        loaded = importlib.import_module(f"{__package__}.{module}")
    except ImportError as exc:
        if _is_driver(module, exc):
            raise _MissingDriver(_install_hint(module, name)) from exc
        raise
    return getattr(loaded, name)


def _is_driver(module: str, exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, is a driver that cannot be imported."""
    drivers = _DRIVERS[module][1]
    chain: list[BaseException] = []
    error: BaseException | None = exc
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return any(
        isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] in drivers
        for e in chain
    )


def _install_hint(module: str, name: str) -> str:
    extra, drivers = _DRIVERS[module]
    return f'{name} needs {drivers[0]}: pip install "agents-state-ext[{extra}]"'
