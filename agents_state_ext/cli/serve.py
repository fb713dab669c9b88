"""``agents-state-ext serve``: the chat API over HTTP on uvicorn, answers streamed as SSE.

Defaults: a SQLite file (``agents-state-ext.db`` here), the offline mock model unless
``OPENAI_API_KEY`` is set, loopback only. Starlette and uvicorn load only when it runs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from .._agent_spec import agent_option, cli_agent
from ..chat import STRATEGIES

if TYPE_CHECKING:
    from ..server.config import ServeSettings

__all__ = ["serve"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name the server answers for besides loopback and the bound address "
    "(repeatable; .example.com with subdomains; env AGENTS_STATE_EXT_ALLOWED_HOSTS).",
)
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
@click.option(
    "--store",
    "store_url",
    default="agents-state-ext.db",
    show_default=True,
    envvar="AGENTS_STATE_EXT_STORE",
    help="Store URL: a SQLite file, sqlite:///…, postgresql://…, redis://….",
)
@click.option(
    "--redis",
    "redis_url",
    envvar="AGENTS_STATE_EXT_REDIS",
    help="Redis URL of the stop bus (needed with --workers > 1).",
)
@click.option("--workers", default=1, show_default=True, type=int, help="Worker processes.")
@click.option(
    "--token",
    "tokens",
    multiple=True,
    metavar="USER=SECRET",
    help="Require `Authorization: Bearer SECRET` (repeatable; env AGENTS_STATE_EXT_TOKENS).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="A file of USER=SECRET lines: tokens kept out of the process list "
    "(env AGENTS_STATE_EXT_TOKENS_FILE).",
)
@click.option(
    "--mock-url",
    envvar="AGENTS_STATE_EXT_MOCK_URL",
    help="Base URL of a mock Responses API server (…/v1) to answer with.",
)
@click.option("--model", default="gpt-4.1", show_default=True, help="Model name.")
@agent_option
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="previous_response",
    show_default=True,
    help="Strategy of new conversations (a request may choose another).",
)
@click.option(
    "--lease-ttl",
    type=float,
    default=15.0,
    show_default=True,
    envvar="AGENTS_STATE_EXT_LEASE_TTL",
    help="Seconds before a dead worker's hold on a conversation lapses.",
)
@click.option(
    "--worker-timeout",
    type=float,
    default=120.0,
    show_default=True,
    envvar="AGENTS_STATE_EXT_WORKER_TIMEOUT",
    help="Seconds a worker may take to answer uvicorn's health check (its start-up, which "
    "imports the SDK, included) before it is replaced.",
)
@click.option("--log-level", default="info", show_default=True, help="uvicorn's log level.")
def serve(
    host: str,
    allowed_hosts: tuple[str, ...],
    port: int,
    store_url: str,
    redis_url: str | None,
    workers: int,
    tokens: tuple[str, ...],
    token_file: str | None,
    mock_url: str | None,
    model: str,
    agent_spec: str | None,
    strategy: str,
    lease_ttl: float,
    worker_timeout: float,
    log_level: str,
) -> None:
    """Serve the chat API over HTTP: create, send, stop, retry, edit, switch, ...

    The app, its routes and its settings are documented in the installed package: run
    `python -m pydoc agents_state_ext.server` (and `python -m pydoc
    agents_state_ext.server.config` for every AGENTS_STATE_EXT_* variable).

    Without OPENAI_API_KEY the answers come from an offline mock. --agent MODULE:ATTR serves
    your own agent (instructions, tools) instead of a plain assistant: each worker imports
    it (env AGENTS_STATE_EXT_AGENT), on the mock model when offline. Secrets given as options
    (--token, a password in --store) show in the process list: prefer --token-file or the
    environment variables. Listening beyond loopback
    needs --token; several workers need --redis and a shared store. Each option may also be
    set as AGENTS_STATE_EXT_<NAME> (AGENTS_STATE_EXT_NAMESPACE: the Redis channel prefix).
    """
    from ..server.auth import parse_tokens, read_tokens_file
    from ..server.config import ServeSettings

    try:
        base = ServeSettings.from_env()  # the tokens and the namespace, unless given here
        given = {**(read_tokens_file(token_file) if token_file else {}), **parse_tokens(tokens)}
        settings = base.replace(
            host=host,
            allowed_hosts=allowed_hosts or base.allowed_hosts,
            port=port,
            store=store_url,
            redis=redis_url,
            workers=workers,
            tokens=given or base.tokens,
            mock_url=mock_url,
            model=model,
            agent=agent_spec or base.agent,
            strategy=strategy,
            lease_ttl=lease_ttl,
        )
        starts_mock = settings.workers > 1 and settings.model_source == "offline"
        # with several workers and no model, serve starts the mock they share (below)
        (settings.replace(mock_url="(started by serve)") if starts_mock else settings).check()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if settings.agent:
        cli_agent(settings.agent)  # a bad --agent is one line here, not a crash in each worker
    _preflight(settings)
    with _shared_mock(settings) as url:
        if url is not None:
            settings = settings.replace(mock_url=url)
        _run(settings, log_level, worker_timeout)


def _preflight(settings: ServeSettings) -> None:
    """Open the store (creating or migrating its schema once) and reach Redis, before workers."""
    import asyncio

    from ..server.stops import RedisStopBus
    from ..stores import open_store

    async def check() -> None:
        store = await open_store(settings.store)
        await store.aclose()
        if settings.redis:
            bus = await RedisStopBus.connect(settings.redis, namespace=settings.namespace)
            await bus.aclose()

    asyncio.run(check())


@contextlib.contextmanager
def _shared_mock(settings: ServeSettings) -> Iterator[str | None]:
    """With several workers and no model, one mock server process they all talk to."""
    if settings.workers == 1 or settings.model_source != "offline":
        yield None
        return
    command = [
        sys.executable,
        "-m",
        "agents_state_ext.testing",
        "serve-mock",
        "--model",
        settings.model,
        "--echo-delay",
        "0.05",
        "--parent-pid",
        str(os.getpid()),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http"):
            raise click.ClickException("the offline mock server did not start")
        click.echo(f"offline mock server at {url}", err=True)
        yield url
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        if process.poll() is None:
            process.kill()


def _run(settings: ServeSettings, log_level: str, worker_timeout: float) -> None:
    import inspect

    import uvicorn

    from ..server import readiness

    os.environ.update(settings.to_env())
    where = "OpenAI API" if settings.model_source == "openai" else "offline mock"
    if settings.model_source == "mock-server":
        where = f"mock server {settings.mock_url}"
    auth = f"{len(settings.tokens)} token(s)" if settings.tokens else "no auth (loopback)"
    click.echo(
        f"agents-state-ext serve: http://{settings.host}:{settings.port} · {settings.workers} "
        f"worker(s) · model: {where} · {auth}",
        err=True,
    )
    options: dict[str, object] = {}
    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:
        # uvicorn's 5 s default kills a worker still importing the SDK on a loaded machine.
        options["timeout_worker_healthcheck"] = max(1, round(worker_timeout))

    def ready(worker_ids: list[str]) -> None:
        click.echo(
            f"agents-state-ext serve: ready, {len(worker_ids)} worker(s) serving "
            f"({', '.join(worker_ids)})",
            err=True,
        )

    with readiness.watch(settings.workers, ready) as env:
        os.environ.update(env)
        uvicorn.run(
            "agents_state_ext.server.app:app_from_env",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_level=log_level,
            timeout_graceful_shutdown=5,
            **options,  # type: ignore[arg-type]
        )
