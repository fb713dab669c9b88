"""Who is asking: the user a request acts for, from a bearer token or (on loopback) a header.

Without tokens (the loopback default) the user is the ``X-User-Id`` header, ``local`` when
absent: anyone who can reach the port may claim any user, which is why ``serve`` refuses a
non-loopback address without tokens. With tokens (``alice=SECRET``) every request needs
``Authorization: Bearer SECRET`` and acts for that token's user; the header is then ignored,
so it cannot claim another user. Secrets are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping

from starlette.requests import Request

from .events import HTTPError

__all__ = [
    "DEFAULT_USER",
    "MIN_TOKEN_LENGTH",
    "USER_HEADER",
    "Identify",
    "TokenAuth",
    "check_secrets",
    "parse_tokens",
    "read_tokens_file",
]

USER_HEADER = "X-User-Id"
DEFAULT_USER = "local"

Identify = Callable[[Request], "str | Awaitable[str | None] | None"]
"""Your own authentication for a mounted app: the user id of a request (``None``: 401)."""

MIN_TOKEN_LENGTH = 16
"""The shortest token secret accepted: a short one can be guessed by trying."""

_USER = re.compile(r"[A-Za-z0-9_.@:+-]{1,128}")


def parse_tokens(specs: str | Iterable[str]) -> dict[str, str]:
    """``USER=SECRET`` pairs (a comma-separated text, or an iterable of pairs) as user -> secret.

    ``ValueError`` for a malformed pair, a user named twice, or one secret given to two users.
    """
    pairs = [p.strip() for p in specs.split(",")] if isinstance(specs, str) else list(specs)
    tokens: dict[str, str] = {}
    for pair in pairs:
        if not pair:
            continue
        user, sep, secret = pair.partition("=")
        user, secret = user.strip(), secret.strip()
        if not sep or not secret:
            raise ValueError(f"a token is USER=SECRET, got {_hidden(pair)!r}")
        check_user(user)
        if user in tokens:
            raise ValueError(f"user {user!r} has two tokens")
        tokens[user] = secret
    if len(set(tokens.values())) != len(tokens):
        raise ValueError("two users have the same token secret")
    return tokens


def check_secrets(tokens: Mapping[str, str]) -> Mapping[str, str]:
    """``tokens`` if every secret has at least :data:`MIN_TOKEN_LENGTH` characters."""
    short = sorted(user for user, secret in tokens.items() if len(secret) < MIN_TOKEN_LENGTH)
    if short:
        raise ValueError(
            f"the token of {', '.join(short)} is shorter than {MIN_TOKEN_LENGTH} characters: "
            "use a long random secret (python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    return tokens


def read_tokens_file(path: str) -> dict[str, str]:
    """The ``USER=SECRET`` lines of a file (blank lines and ``#`` comments skipped).

    A file (or an environment variable) keeps the secrets out of the process list.
    """
    try:
        with open(path, encoding="utf-8") as file:
            lines = [line.strip() for line in file]
    except OSError as exc:
        raise ValueError(f"cannot read the tokens file {path!r}: {exc.strerror}") from None
    return parse_tokens([line for line in lines if line and not line.startswith("#")])


def check_user(user: str) -> str:
    """``user`` if it is a user id (1-128 letters, digits or ``_.@:+-``), else ``ValueError``."""
    if not _USER.fullmatch(user):
        raise ValueError(
            f"a user id is 1-128 letters, digits or _.@:+- characters, got {user[:40]!r}"
        )
    return user


def _hidden(pair: str) -> str:
    user, sep, _ = pair.partition("=")
    return f"{user}=***" if sep else pair


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class TokenAuth:
    """Finds the user of a request: by bearer token when tokens are set, else by header.

    ``tokens`` maps user -> secret (see :func:`parse_tokens`; each at least
    :data:`MIN_TOKEN_LENGTH` characters, else ``ValueError``); ``identify`` replaces both
    with your own function (for an app mounted behind your own authentication).
    """

    def __init__(
        self, tokens: Mapping[str, str] | None = None, *, identify: Identify | None = None
    ) -> None:
        check_secrets(tokens or {})
        self._tokens = [(user, _digest(secret)) for user, secret in (tokens or {}).items()]
        for user, _ in self._tokens:
            check_user(user)
        self._identify = identify

    @property
    def required(self) -> bool:
        """Whether requests must carry a bearer token."""
        return bool(self._tokens)

    async def user(self, request: Request) -> str:
        """The user ``request`` acts for; ``HTTPError`` 401 if it proves none, 400 if malformed."""
        if self._identify is not None:
            found = self._identify(request)
            if inspect.isawaitable(found):
                found = await found
            if found is None:
                raise HTTPError(401, "Unauthorized", "authentication required")
            return str(found)
        if self._tokens:
            return self._bearer(request.headers.get("authorization", ""))
        claimed = request.headers.get(USER_HEADER)
        if claimed is None:
            return DEFAULT_USER
        try:
            return check_user(claimed.strip())
        except ValueError as exc:
            raise HTTPError(400, "BadRequest", f"{USER_HEADER}: {exc}") from None

    def _bearer(self, header: str) -> str:
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise HTTPError(401, "Unauthorized", "a bearer token is required")
        presented = _digest(secret.strip())
        found = None
        for user, digest in self._tokens:  # every one is compared: no early exit
            if hmac.compare_digest(presented, digest):
                found = user
        if found is None:
            raise HTTPError(401, "Unauthorized", "unknown token")
        return found
