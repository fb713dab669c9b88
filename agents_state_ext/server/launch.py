"""Where this process listens, as the uvicorn command that started it says (``--host``).

``uvicorn --factory agents_state_ext.server.app:app_from_env --host 0.0.0.0`` binds where its
command line says, and the app cannot see that address before a request arrives (an ASGI
lifespan carries none). When this process is the ``uvicorn`` command, uvicorn's own option
parser reads that command line (``--host`` or ``UVICORN_HOST``), so :func:`~.app.app_from_env`
checks the real address at start-up. Started any other way (gunicorn, ``--fd``, ``--uds``,
``uvicorn.run`` in a program of yours) the address is unknown here, and :mod:`.guard` refuses,
request by request, what a server without authentication receives beyond loopback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import PurePath

__all__ = ["uvicorn_host"]


def uvicorn_host(argv: Sequence[str] | None = None) -> str | None:
    """The ``--host`` of the uvicorn command line ``argv`` (default ``sys.argv``), or ``None``.

    ``None`` when ``argv`` is not the ``uvicorn`` command (nor ``python -m uvicorn``), when it
    listens on a file descriptor or a Unix socket, or when it cannot be parsed.
    """
    argv = list(sys.argv if argv is None else argv)
    if not argv or not _is_uvicorn(argv[0]):
        return None
    import click
    import uvicorn

    try:
        context = uvicorn.main.make_context("uvicorn", argv[1:], resilient_parsing=True)
    except click.ClickException:
        return None
    params = context.params
    if params.get("fd") is not None or params.get("uds"):
        return None
    host = params.get("host")
    return str(host) if host else None


def _is_uvicorn(program: str) -> bool:
    path = PurePath(program)
    if path.name in ("uvicorn", "uvicorn.exe"):
        return True
    return path.parts[-2:] == ("uvicorn", "__main__.py")
