"""The HTTP side of the mock: routing, request logging and the non-conversation endpoints.

``POST /chat/completions`` is routed here too, to the stateless Chat Completions fake.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2

from . import _conversations as conversations
from . import _request_rules as rules
from ._chat_completions import ChatCompletionsEndpoint
from ._chat_rules import check_chat_completion
from ._compact import compact
from ._items import ApiError, json_response
from ._records import RecordedRequest
from ._responses import ResponsesEndpoint
from ._state import ServerState

__all__ = ["Backend"]

_Handler = Callable[..., Awaitable[httpx2.Response]]
_Rule = Callable[[ServerState, dict[str, Any]], None]
_SECRET_HEADERS = ("authorization", "openai-organization", "openai-project", "cookie")


def _json(status: int, body: Any) -> httpx2.Response:
    return json_response(status, body)


def _error_message(response: httpx2.Response) -> str | None:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return error.get("message") if isinstance(error, dict) else None


def _response_rule(state: ServerState, body: dict[str, Any]) -> None:
    rules.check_create_response(body, history=state.known_context(body))


def _compact_rule(state: ServerState, body: dict[str, Any]) -> None:
    rules.check_compact(body, history=state.known_context(body))


def _chat_rule(state: ServerState, body: dict[str, Any]) -> None:
    check_chat_completion(body)


def _conversation_rule(state: ServerState, body: dict[str, Any]) -> None:
    rules.check_create_conversation(body)


def _items_rule(state: ServerState, body: dict[str, Any]) -> None:
    rules.check_add_items(body)


class Backend:
    """The fake server behind the mock transport: state, scripted model and request log."""

    def __init__(
        self,
        prefix: str,
        *,
        model: str,
        state_flags: dict[str, Any],
        endpoint_flags: dict[str, Any],
        validate_requests: bool = True,
    ) -> None:
        self._prefix = prefix
        self._validate = validate_requests
        self._model = model
        self._state_flags = state_flags
        self._endpoint_flags = endpoint_flags
        self.requests: list[RecordedRequest] = []
        self._served = 0  # requests answered, for their x-request-id
        self._routes = self._route_table()
        self.reset()

    def reset(self) -> None:
        """Fresh state, queues and log."""
        self.state = ServerState(**self._state_flags)
        self.responses = ResponsesEndpoint(self.state, model=self._model, **self._endpoint_flags)
        self.chat = ChatCompletionsEndpoint(self.responses, self.state.ids, model=self._model)
        self.requests.clear()

    async def dispatch(self, request: httpx2.Request) -> httpx2.Response:
        """The transport handler: log the request, answer it, log the status."""
        content = await request.aread()
        path = request.url.path[len(self._prefix) :]
        record = RecordedRequest(
            method=request.method,
            path=path,
            url=str(request.url),
            params=dict(request.url.params),
            json=json.loads(content) if content else None,
            headers={
                name.lower(): value
                for name, value in request.headers.items()
                if name.lower() not in _SECRET_HEADERS
            },
        )
        self.requests.append(record)
        self._served += 1
        record.request_id = f"req_{self._served}"
        try:
            response = await self._answer(request, record)
        except ApiError as error:
            response = error.to_response()
        response.headers["x-request-id"] = record.request_id
        record.status = response.status_code
        if response.status_code >= 400:
            record.error = _error_message(response)
        return response

    def _route_table(self) -> list[tuple[str, re.Pattern[str], _Handler]]:
        conv = r"/conversations/(?P<conversation_id>[^/]+)"
        table: list[tuple[str, str, _Handler]] = [
            ("POST", r"/responses", self._checked(_response_rule, self._create_response)),
            ("POST", r"/responses/compact", self._checked(_compact_rule, self._compact)),
            ("POST", r"/chat/completions", self._checked(_chat_rule, self._create_chat)),
            ("GET", r"/responses/(?P<response_id>[^/]+)", self._retrieve_response),
            ("GET", r"/responses/(?P<response_id>[^/]+)/input_items", self._input_items),
            ("DELETE", r"/responses/(?P<response_id>[^/]+)", self._delete_response),
            (
                "POST",
                r"/conversations",
                self._checked(_conversation_rule, self._conversation_call(conversations.create)),
            ),
            ("GET", conv, self._conversation_call(conversations.retrieve)),
            ("POST", conv, self._conversation_call(conversations.update)),
            ("DELETE", conv, self._conversation_call(conversations.delete)),
            ("GET", conv + "/items", self._conversation_call(conversations.list_items)),
            (
                "POST",
                conv + "/items",
                self._checked(_items_rule, self._conversation_call(conversations.add_items)),
            ),
            (
                "GET",
                conv + r"/items/(?P<item_id>[^/]+)",
                self._conversation_call(conversations.get_item),
            ),
            (
                "DELETE",
                conv + r"/items/(?P<item_id>[^/]+)",
                self._conversation_call(conversations.delete_item),
            ),
        ]
        return [(method, re.compile(pattern + "$"), handler) for method, pattern, handler in table]

    def _checked(self, rule: _Rule, handler: _Handler) -> _Handler:
        """``handler`` behind the request rules: a rejected body reaches no state, reply, fault."""

        async def checked(
            request: httpx2.Request, record: RecordedRequest, **groups: str
        ) -> httpx2.Response:
            if self._validate and isinstance(record.json, dict):
                rule(self.state, record.json)
            return await handler(request, record, **groups)

        return checked

    async def _answer(self, request: httpx2.Request, record: RecordedRequest) -> httpx2.Response:
        for method, pattern, handler in self._routes:
            match = pattern.match(record.path)
            if match and method == request.method:
                return await handler(request, record, **match.groupdict())
        raise ApiError(404, f"Invalid URL ({request.method} {request.url.path})")

    async def _create_response(
        self, request: httpx2.Request, record: RecordedRequest
    ) -> httpx2.Response:
        if not isinstance(record.json, dict):
            raise ApiError(400, "We could not parse the JSON body of your request.")
        return await self.responses.handle(request, record.json, record)

    async def _create_chat(
        self, request: httpx2.Request, record: RecordedRequest
    ) -> httpx2.Response:
        if not isinstance(record.json, dict):
            raise ApiError(400, "We could not parse the JSON body of your request.")
        return await self.chat.handle(request, record.json, record)

    async def _compact(self, request: httpx2.Request, record: RecordedRequest) -> httpx2.Response:
        if not isinstance(record.json, dict):
            raise ApiError(400, "We could not parse the JSON body of your request.")
        return _json(200, compact(self.state, record.json))

    async def _retrieve_response(
        self, request: httpx2.Request, record: RecordedRequest, response_id: str
    ) -> httpx2.Response:
        return _json(200, copy.deepcopy(self.state.stored_response(response_id).body))

    async def _input_items(
        self, request: httpx2.Request, record: RecordedRequest, response_id: str
    ) -> httpx2.Response:
        """``GET /responses/{id}/input_items``: the context the response was made from.

        That is every item before its output: a previous response's or the conversation's
        items, then the request's input [inf: "Items from this conversation are prepended to
        ``input_items`` for this response request", openai ``response_create_params.py``],
        paged like the conversation items (``limit``, ``after``, ``order``, default ``desc``).
        """
        stored = self.state.stored_response(response_id)
        produced = len(stored.body.get("output") or [])
        context = stored.transcript[: len(stored.transcript) - produced]
        return _json(200, conversations.page_of(context, record.params))

    async def _delete_response(
        self, request: httpx2.Request, record: RecordedRequest, response_id: str
    ) -> httpx2.Response:
        self.state.stored_response(response_id)
        del self.state.responses[response_id]
        return _json(200, {"id": response_id, "object": "response", "deleted": True})

    def _conversation_call(self, func: Callable[..., dict[str, Any]]) -> _Handler:
        async def handler(
            request: httpx2.Request, record: RecordedRequest, **groups: str
        ) -> httpx2.Response:
            args: list[Any] = [self.state, *groups.values()]
            if request.method == "POST":
                body = record.json if record.json is not None else {}
                if not isinstance(body, dict):
                    raise ApiError(400, "We could not parse the JSON body of your request.")
                args.append(body)
            elif func is conversations.list_items:
                args.append(record.params)
            return _json(200, func(*args))

        return handler
