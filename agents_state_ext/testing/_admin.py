"""The private admin routes of the mock over HTTP (``/__mock__/...``) and their wire shapes.

``MockServer`` drives a mock in another process through these routes: scripting (replies,
faults, responder), reading the server-side state, reset. Every body is JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from ._faults import Fault
from ._items import ApiError
from ._mock_server import MockResponsesAPI
from ._records import RecordedRequest
from ._replies import Reply, ResponseContext, split_words
from ._responses import Responder

__all__ = [
    "ADMIN_PREFIX",
    "Admin",
    "request_from_dict",
    "request_to_dict",
    "resolve_responder",
]

ADMIN_PREFIX = "/__mock__"


class AdminError(Exception):
    """An admin call that cannot be answered: an HTTP status and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def request_to_dict(record: RecordedRequest) -> dict[str, Any]:
    """A recorded request as JSON-ready data."""
    data = {f.name: getattr(record, f.name) for f in fields(record)}
    data["fault"] = record.fault.to_dict() if record.fault is not None else None
    data["events"] = list(record.events)
    return data


def request_from_dict(data: dict[str, Any]) -> RecordedRequest:
    """The recorded request that :func:`request_to_dict` wrote."""
    fault = data.get("fault")
    return RecordedRequest(**{**data, "fault": Fault.from_dict(fault) if fault else None})


def _slow_echo(delay: float) -> Responder:
    def reply(context: ResponseContext) -> Reply:
        text = f"echo: {context.last_user_text or ''}"
        return Reply.text(text, chunks=split_words(text, len(text.split())), delay=delay)

    return reply


def resolve_responder(spec: str | None, *, echo_delay: float = 0.0) -> Responder | None:
    """The responder named ``"module:function"``; without a name, the echo (one delta a word,
    ``echo_delay`` seconds apart when streamed), or None for the mock's own echo."""
    if spec is None:
        return _slow_echo(echo_delay) if echo_delay > 0 else None
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a responder is named 'module:function', got {spec!r}")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(f"{spec!r} is not callable")
    responder: Responder = found
    return responder


_Route = Callable[..., Any]


class Admin:
    """The admin routes of one mock; ``responder`` is what a reset restores."""

    def __init__(self, mock: MockResponsesAPI, responder: Responder | None = None) -> None:
        self._mock = mock
        self._responder = responder if responder is not None else mock.responder
        mock.responder = self._responder
        table: list[tuple[str, str, _Route]] = [
            ("GET", r"/health", self._health),
            ("POST", r"/reset", self._reset),
            ("POST", r"/replies", self._enqueue),
            ("POST", r"/faults", self._inject),
            ("DELETE", r"/faults", self._clear_faults),
            ("GET", r"/queues", self._queues),
            ("POST", r"/responder", self._set_responder),
            ("GET", r"/requests", self._requests),
            ("GET", r"/responses", lambda _: mock.response_ids),
            ("DELETE", r"/responses", lambda _: mock.expire_response()),
            ("GET", r"/responses/(?P<key>[^/]+)", lambda _, key: mock.response(key)),
            ("DELETE", r"/responses/(?P<key>[^/]+)", lambda _, key: mock.expire_response(key)),
            ("GET", r"/responses/(?P<key>[^/]+)/transcript", lambda _, key: mock.transcript(key)),
            ("POST", r"/conversations", self._create_conversation),
            (
                "GET",
                r"/conversations/(?P<key>[^/]+)/items",
                lambda _, key: mock.conversation_items(key),
            ),
        ]
        self._routes = [(m, re.compile(p + "$"), route) for m, p, route in table]

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """Answer one admin call: ``(status, JSON payload)``; ``path`` is after the prefix."""
        try:
            payload = json.loads(body) if body else {}
            for route_method, pattern, route in self._routes:
                match = pattern.match(path)
                if match and route_method == method:
                    return 200, route(payload, **match.groupdict())
            raise AdminError(404, f"no admin route {method} {ADMIN_PREFIX}{path}")
        except AdminError as error:
            return error.status, {"error": {"message": error.message}}
        except KeyError as error:
            return 404, {"error": {"message": f"not found: {error.args[0]}"}}
        except ApiError as error:
            return error.status, error.body()
        except (ValueError, TypeError, ImportError, AttributeError) as error:
            return 400, {"error": {"message": f"{type(error).__name__}: {error}"}}

    def _health(self, payload: Any) -> dict[str, Any]:
        return {"status": "ok", "base_url": self._mock.base_url, "pid": os.getpid()}

    def _reset(self, payload: Any) -> None:
        self._mock.reset()
        self._mock.responder = self._responder

    def _enqueue(self, payload: Any) -> None:
        self._mock.enqueue(*(Reply.from_dict(reply) for reply in payload.get("replies", [])))

    def _inject(self, payload: Any) -> None:
        self._mock.inject(
            Fault.from_dict(payload.get("fault") or {}), times=int(payload.get("times", 1))
        )

    def _clear_faults(self, payload: Any) -> list[dict[str, Any]]:
        return [fault.to_dict() for fault in self._mock.clear_faults()]

    def _queues(self, payload: Any) -> dict[str, int]:
        return {"replies": self._mock.pending_replies, "faults": self._mock.pending_faults}

    def _set_responder(self, payload: Any) -> None:
        self._mock.responder = resolve_responder(
            payload.get("responder"), echo_delay=float(payload.get("echo_delay", 0.0))
        )

    def _requests(self, payload: Any) -> list[dict[str, Any]]:
        return [request_to_dict(record) for record in self._mock.requests]

    def _create_conversation(self, payload: Any) -> dict[str, str]:
        return {"id": self._mock.create_conversation(payload.get("items"), payload.get("metadata"))}
