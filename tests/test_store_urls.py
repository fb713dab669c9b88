"""open_store(url) picks the backend; the optional backends load only when asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _backends import postgres_cleanup, postgres_url, redis_cleanup, redis_url, unique_name

from agents_state_ext.errors import StoreError
from agents_state_ext.stores import InMemoryStore, SQLiteStore, open_store

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]


async def test_sqlite_urls_and_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cases = {
        "sqlite:///relative.db": "relative.db",
        f"sqlite:///{tmp_path / 'absolute.db'}": str(tmp_path / "absolute.db"),
        "sqlite://": ":memory:",
        "plain.db": "plain.db",
        str(tmp_path / "plain-absolute.db"): str(tmp_path / "plain-absolute.db"),
    }
    for url, path in cases.items():
        store = await open_store(url)
        try:
            assert isinstance(store, SQLiteStore) and store.path == path
            await store.create_conversation("c1", strategy="replay")
        finally:
            await store.aclose()
    assert (tmp_path / "relative.db").exists() and (tmp_path / "plain.db").exists()
    store = await open_store(tmp_path / "relative.db", read_only=True)
    try:
        assert await store.list_conversations() == ["c1"]
    finally:
        await store.aclose()


async def test_memory() -> None:
    for url in ("memory:", "memory://"):
        store = await open_store(url)
        assert isinstance(store, InMemoryStore)
        await store.aclose()


async def test_an_unknown_scheme_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="unknown store URL scheme 'mysql'") as caught:
        await open_store("mysql://user:s3cret@host/db")
    assert "s3cret" not in str(caught.value)


async def test_a_malformed_sqlite_url_is_a_store_error() -> None:
    for url in ("sqlite://host/db", "sqlite:relative.db"):
        with pytest.raises(StoreError):
            await open_store(url)


@pytest.mark.parametrize(
    ("url", "driver", "module", "extra"),
    [
        ("postgresql://127.0.0.1/test", "psycopg", "postgres", "postgres"),
        ("postgres://127.0.0.1/test", "psycopg_pool", "postgres", "postgres"),
        ("redis://127.0.0.1:6379/0", "redis", "redis", "redis"),
        ("rediss://127.0.0.1:6379/0", "redis", "redis", "redis"),
    ],
)
async def test_a_missing_driver_names_the_extra_to_install(
    url: str, driver: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver cannot be imported, and the backend module is imported afresh.
    for name in list(sys.modules):
        if name == driver or name.startswith(f"{driver}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, driver, None)
    monkeypatch.delitem(sys.modules, f"agents_state_ext.stores.{module}", raising=False)
    with pytest.raises(StoreError, match=rf'pip install "agents-state-ext\[{extra}\]"'):
        await open_store(url)


def test_importing_the_package_loads_neither_driver() -> None:
    code = (
        "import sys, agents_state_ext.stores as s\n"
        "print(sorted(m for m in ('psycopg', 'psycopg_pool', 'redis') if m in sys.modules))\n"
        "print('PostgresStore' in dir(s), 'RedisStore' in dir(s))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[:2] == ["[]", "True True"]


def test_the_optional_backends_load_on_first_use() -> None:
    import agents_state_ext.stores as stores
    from agents_state_ext.stores.postgres import PostgresStore
    from agents_state_ext.stores.redis import RedisStore

    assert stores.PostgresStore is PostgresStore
    assert stores.RedisStore is RedisStore
    with pytest.raises(AttributeError):
        _ = stores.NoSuchStore  # type: ignore[attr-defined]


async def test_postgres_urls_connect() -> None:
    url = postgres_url()
    from agents_state_ext.stores import PostgresStore

    schema = unique_name("test")
    store = await open_store(url, schema=schema)
    try:
        assert isinstance(store, PostgresStore)
        assert await store.list_conversations() == []
    finally:
        await store.aclose()
        await postgres_cleanup([schema])


async def test_redis_urls_connect() -> None:
    url = redis_url()
    from agents_state_ext.stores import RedisStore

    namespace = unique_name("test")
    store = await open_store(url, namespace=namespace)
    try:
        assert isinstance(store, RedisStore)
        await store.create_conversation("c1", strategy="replay")
        assert await store.list_conversations() == ["c1"]
    finally:
        await store.aclose()
        await redis_cleanup([namespace])
