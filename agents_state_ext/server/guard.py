"""``RequestGuard``: what every request passes before any route runs (the app's front door).

- **Host** (DNS rebinding): a page on an attacker's name that resolves to 127.0.0.1 reaches a
  loopback server with its own name in ``Host``. Only the allowed hosts are answered: loopback
  names and addresses, the bound address (any IP address when bound to ``0.0.0.0``), and what
  the app lists (``allowed_hosts``: exact
  names, ``.example.com`` for a domain and its subdomains, ``*`` for any); anything else is 421.
- **Cross-site writes**: a state-changing request (``POST``, ``PUT``, ``PATCH``, ``DELETE``)
  with a body must say ``Content-Type: application/json`` (a form or a ``no-cors`` fetch
  cannot), else 415; one whose ``Origin`` is not the host it was sent to (nor an allowed host
  the app listed), or that the browser marks ``Sec-Fetch-Site: cross-site``, is 403.
- **Open loopback**: without authentication (``local_only``) a request that arrived on a
  non-loopback address of this machine is 403, however the server was started (the socket a
  request came through is visible to the app, where it was bound not always), and so is one a
  proxy forwarded (``Forwarded``, ``X-Forwarded-For``, ``X-Forwarded-Host``, ``X-Real-IP``):
  a proxy on this machine reaches it over loopback for whoever it serves.

Every answer also carries ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from .config import is_loopback

__all__ = ["LOOPBACK_HOSTS", "RequestGuard", "host_allowed", "split_host"]

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
"""Always allowed: names and addresses that reach this machine only."""

_WILDCARDS = frozenset({"0.0.0.0", "::"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_JSON = "application/json"
_FORWARDED = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")

Scope = dict[str, Any]


def split_host(value: str) -> str:
    """The host of a ``Host`` header value, lower case, without port or IPv6 brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` (no port) is loopback or matches one of ``allowed``.

    A wildcard address in ``allowed`` (``0.0.0.0``, ``::``: bound to every address) matches
    any IP address; a name matches only when listed.
    """
    if not host:
        return False
    if is_loopback(host):
        return True
    for entry in allowed:
        if entry == "*" or entry == host:
            return True
        if entry in _WILDCARDS and _is_address(host):
            return True
        if entry.startswith(".") and (host == entry[1:] or host.endswith(entry)):
            return True
    return False


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _listed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` is one the app named (not ``*``, not a loopback default)."""
    return any(
        entry == host or (entry.startswith(".") and (host == entry[1:] or host.endswith(entry)))
        for entry in allowed
    )


def _normalized(hosts: Iterable[str]) -> tuple[str, ...]:
    found = []
    for entry in hosts:
        entry = entry.strip().lower()
        if not entry:
            continue
        dot = entry.startswith(".")
        host = split_host(entry.lstrip(".")) if entry != "*" else "*"
        found.append("." + host if dot else host)
    return tuple(found)


class RequestGuard:
    """ASGI middleware: refuses a foreign ``Host`` (421), a cross-site write (403, 415), and
    without authentication a request from beyond loopback (403); see the module.
    """

    def __init__(
        self, app: Any, *, allowed_hosts: Iterable[str] = (), local_only: bool = False
    ) -> None:
        self.app = app
        self.allowed_hosts = _normalized(allowed_hosts)
        self.local_only = local_only
        self._warned = False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            status, kind, message = refusal
            await _answer(send, status, kind, message)
            return

        async def send_nosniff(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"x-content-type-options" for k, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_nosniff)

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = _headers(scope)
        server = scope.get("server") or ("", None)
        host_header = headers.get("host", "")
        host = split_host(host_header) if host_header else str(server[0]).lower()
        if self.local_only:
            beyond = _beyond_loopback(str(server[0] or ""), headers)
            if beyond is not None:
                if not self._warned:
                    self._warned = True
                    logger.error(
                        "refusing requests that %s: no tokens are set, so anyone who reaches "
                        "the port could act as any user; set tokens or listen on 127.0.0.1 "
                        "with no proxy in front",
                        beyond,
                    )
                return (
                    403,
                    "Forbidden",
                    f"this server has no authentication and answers on loopback only: this "
                    f"request {beyond}",
                )
        if not host_allowed(host, self.allowed_hosts):
            return (
                421,
                "MisdirectedRequest",
                f"this server does not answer for host {host[:80]!r}; add it to the allowed "
                "hosts (--allowed-host, AGENTS_STATE_EXT_ALLOWED_HOSTS, allowed_hosts=)",
            )
        if scope["method"] in _WRITES:
            return _cross_site(headers, host_header, self.allowed_hosts)
        return None


def _beyond_loopback(arrived: str, headers: dict[str, str]) -> str | None:
    """Why a request may come from beyond this machine (``None``: it cannot).

    A proxy on this machine connects over loopback for anyone it serves; the headers it adds
    say so (none are trusted for anything else).
    """
    if arrived and not is_loopback(arrived):
        return f"arrived on {arrived[:80]}"
    proxied = next((name for name in _FORWARDED if name in headers), None)
    if proxied is not None:
        return f"came through a proxy ({proxied})"
    return None


def _cross_site(
    headers: dict[str, str], host_header: str, allowed: tuple[str, ...]
) -> tuple[int, str, str] | None:
    if headers.get("sec-fetch-site") == "cross-site":
        return 403, "Forbidden", "cross-site requests may not change anything here"
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin.strip())
        same = bool(parts.netloc) and parts.netloc.lower() == host_header.strip().lower()
        listed = bool(parts.hostname) and _listed(parts.hostname or "", allowed)
        if not (same or listed):
            return 403, "Forbidden", f"requests from origin {origin[:80]!r} may not change anything"
    has_body = headers.get("content-length", "0").strip() not in ("", "0") or (
        "transfer-encoding" in headers
    )
    media = headers.get("content-type", "").partition(";")[0].strip().lower()
    if has_body and media != _JSON:
        return 415, "UnsupportedMediaType", f"a request body must be {_JSON}"
    return None


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return found


async def _answer(send: Any, status: int, kind: str, message: str) -> None:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
