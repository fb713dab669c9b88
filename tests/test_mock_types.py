"""Every body and SSE event the mock sends, validated strictly against openai's own types.

openai's client builds its models leniently (``construct_type`` fills what it can and keeps
unknown keys), so a body that misses a required field or misspells one still "works" there.
Here each body goes through pydantic's validation of the model openai would build
(``TypeAdapter(...).validate_python(data, strict=True)``: a missing required field fails), and
then every model in the result, at any depth, must have no field openai does not define (its
``model_extra`` is empty). The exceptions are named where they are made.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from openai import BaseModel
from openai.types.conversations import (
    Conversation,
    ConversationDeletedResource,
    ConversationItem,
    ConversationItemList,
)
from openai.types.responses import (
    CompactedResponse,
    Response,
    ResponseInputMessageItem,
    ResponseItemList,
    ResponseStreamEvent,
)
from openai.types.shared import ErrorObject
from pydantic import TypeAdapter, ValidationError

from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

pytestmark = pytest.mark.anyio


def _event_classes() -> dict[str, type[BaseModel]]:
    union = typing.get_args(ResponseStreamEvent)[0]  # Annotated[Union[...], discriminator]
    classes: dict[str, type[BaseModel]] = {}
    for member in typing.get_args(union):
        for name in typing.get_args(member.model_fields["type"].annotation):
            classes[name] = member
    return classes


EVENT_CLASSES = _event_classes()


ALLOWED_EXTRAS: dict[type[BaseModel], set[str]] = {
    # The API reference's Response object and its examples carry ``store`` [doc]; the
    # installed openai's ``Response`` does not declare it (it keeps it as an extra).
    Response: {"store"},
}


def _extras(value: Any, where: str) -> list[str]:
    """Fields openai's models do not define, anywhere inside ``value``."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        allowed = ALLOWED_EXTRAS.get(type(value), set())
        found += [f"{where}.{key}" for key in value.model_extra or {} if key not in allowed]
        for name in type(value).model_fields:
            found += _extras(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            found += _extras(entry, f"{where}[{index}]")
    elif isinstance(value, dict):
        for key, entry in value.items():
            found += _extras(entry, f"{where}.{key}")
    return found


@functools.cache
def _adapter(model: Any) -> TypeAdapter[Any]:
    return TypeAdapter(model)  # building one for the event union takes seconds: build it once


def problems(model: Any, data: Any, where: str) -> list[str]:
    """Why ``data`` is not a strict ``model`` (a class or a type such as a union); [] if it is."""
    try:
        value = _adapter(model).validate_python(data, strict=True)
    except ValidationError as error:
        return [f"{where}: {e['loc']} {e['msg']}" for e in error.errors()]
    return _extras(value, where)


def event_problems(event: dict[str, Any], where: str) -> list[str]:
    """Why one SSE event is not a strict ``ResponseStreamEvent`` of its ``type``."""
    cls = EVENT_CLASSES.get(str(event.get("type")))
    if cls is None:
        return [f"{where}: {event.get('type')!r} is no ResponseStreamEvent type"]
    found = problems(cls, event, f"{where} {event['type']}")
    if found:
        return found
    # The union too: the event must be the member its type names, not another one.
    union = _adapter(ResponseStreamEvent).validate_python(event, strict=True)
    return [] if isinstance(union, cls) else [f"{where}: parsed as {type(union)}"]


def grammar_problems(events: list[dict[str, Any]], where: str) -> list[str]:
    """Numbering and ids: ``sequence_number`` 0, 1, ...; every item event names the item that
    ``output_item.added`` opened at its ``output_index``, every content event a part that
    ``content_part.added`` opened; each item and part is closed once, in order."""
    found: list[str] = []
    if [e["sequence_number"] for e in events] != list(range(len(events))):
        found.append(f"{where}: sequence numbers {[e['sequence_number'] for e in events]}")
    items: dict[int, str | None] = {}
    parts: dict[int, set[int]] = {}
    open_items: list[int] = []
    for event in events:
        kind, index = event["type"], event.get("output_index")
        if kind == "response.output_item.added":
            if index != len(items):
                found.append(f"{where}: item {index} added out of order")
            items[index] = event["item"].get("id")
            parts[index] = set()
            open_items.append(index)
        elif kind == "response.output_item.done":
            if open_items != [index] or event["item"].get("id") != items.get(index):
                found.append(f"{where}: item {index} done while open: {open_items}")
            open_items = [i for i in open_items if i != index]
        elif index is not None:
            if index not in open_items or event.get("item_id") != items.get(index):
                found.append(f"{where}: {kind} for item {index} that is not open")
            if kind == "response.content_part.added":
                parts[index].add(event["content_index"])
            elif "content_index" in event and event["content_index"] not in parts[index]:
                found.append(f"{where}: {kind} for part {event['content_index']} never added")
    if open_items:
        found.append(f"{where}: items left open: {open_items}")
    return found


@dataclass
class Wire:
    """Everything the mock sent in one test: JSON bodies and SSE events, by request."""

    mock: MockResponsesAPI
    http: httpx2.AsyncClient
    seen: list[tuple[str, int, Any]] = field(default_factory=list)
    """``(request, status, body)``; a stream's body is its list of events."""

    async def call(
        self, method: str, path: str, body: Any = None, **params: Any
    ) -> tuple[int, Any]:
        """Send one request; the status and the JSON body (or the events); (0, None) on a
        transport error, with the events that came before a dropped stream."""
        where = f"{method} {path} {json.dumps(body)[:80] if body is not None else ''}"
        events: list[dict[str, Any]] = []
        status = 0
        try:
            request = self.http.build_request(
                method, f"{self.mock.base_url}{path}", json=body, params=params or None
            )
            response = await self.http.send(request, stream=True)
            status = response.status_code
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
                self.seen.append((where, status, events))
                return status, events
            content = await response.aread()
        except httpx2.TransportError:
            if events:
                self.seen.append((where, status, events))
            return 0, events or None
        data = json.loads(content) if content else None
        self.seen.append((where, status, data))
        return status, data

    async def create(self, **body: Any) -> tuple[int, Any]:
        """``POST /responses`` with ``model`` gpt-4.1 unless given."""
        sent = {k: v for k, v in body.items() if v is not None}
        return await self.call("POST", "/responses", {"model": "gpt-4.1", **sent})


def check_all(seen: list[tuple[str, int, Any]], kinds: dict[str, Any]) -> list[str]:
    """The problems of every body in ``seen``; ``kinds`` maps a request prefix to its model."""
    found: list[str] = []
    for where, status, body in seen:
        if status >= 400:
            found += problems(ErrorObject, body.get("error"), where)
            if set(body) != {"error"}:
                found.append(f"{where}: error body keys {sorted(body)}")
            continue
        if isinstance(body, list):
            for event in body:
                found += event_problems(event, where)
            terminal = body[-1]["type"] if body else None
            if terminal in ("response.completed", "response.incomplete"):
                found += grammar_problems(body, where)
            continue
        model = next((m for prefix, m in kinds.items() if where.startswith(prefix)), None)
        if model is None:
            found.append(f"{where}: no model to check it against")
        elif isinstance(model, types.FunctionType):
            found += model(body, where)
        elif model is not dict:
            found += problems(model, body, where)
    return found


def compacted_problems(body: dict[str, Any], where: str) -> list[str]:
    """A ``CompactedResponse``, its user messages checked as ``ResponseInputMessageItem``.

    Its ``output`` is "a list of all user messages, followed by a single compaction item"
    [doc: openai ``compacted_response.py``], yet typed ``List[ResponseOutputItem]``, whose only
    message is the assistant's: openai's own type cannot hold what its docstring promises.
    """
    users = [item for item in body["output"] if item.get("role") == "user"]
    rest = {**body, "output": [item for item in body["output"] if item.get("role") != "user"]}
    found = problems(CompactedResponse, rest, where)
    for item in users:
        found += problems(ResponseInputMessageItem, item, where)
    return found


def page_of(model: type[BaseModel]) -> Callable[[dict[str, Any], str], list[str]]:
    """A list page as ``model``; an empty one must carry ``first_id``/``last_id`` null.

    The one exception to the types: openai types both ids as ``str``, the mock sends null on an
    empty page, as the live API does for the lists it types the same way (see
    ``_conversations.list_page``). The rest of an empty page is checked strictly.
    """

    def check(body: dict[str, Any], where: str) -> list[str]:
        if body.get("data") != []:
            return problems(model, body, where)
        found = [
            f"{where}: {key} of an empty page is {body.get(key)!r}"
            for key in ("first_id", "last_id")
            if key not in body or body[key] is not None
        ]
        return found + problems(model, {**body, "first_id": "-", "last_id": "-"}, where)

    return check


KINDS: dict[str, Any] = {
    "POST /responses/compact": compacted_problems,
    "POST /responses": Response,
    "DELETE /responses/": dict,  # openai's responses.delete returns None: no body type
    "GET /responses/resp_1/input_items": page_of(ResponseItemList),
    "GET /responses/": Response,
    "POST /conversations/conv_1/items": page_of(ConversationItemList),
    "GET /conversations/conv_1/items/": ConversationItem,
    "GET /conversations/conv_1/items": page_of(ConversationItemList),
    "DELETE /conversations/conv_1/items/": Conversation,
    "DELETE /conversations/": ConversationDeletedResource,
    "POST /conversations": Conversation,
    "GET /conversations/": Conversation,
}


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    async with MockResponsesAPI() as mock, httpx2.AsyncClient(transport=mock.transport) as http:
        yield Wire(mock, http)


def assert_strict(wire: Wire) -> None:
    assert wire.seen, "nothing was sent"
    assert check_all(wire.seen, KINDS) == []


REFUSAL = {
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "refusal", "refusal": "I cannot help with that."}],
}
TWO_PARTS = {
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [
        {"type": "output_text", "text": "first part", "annotations": []},
        {"type": "output_text", "text": "second part", "annotations": []},
    ],
}
CUSTOM_CALL = {"type": "custom_tool_call", "call_id": "call_c", "name": "grep", "input": "a b"}

REPLIES: dict[str, Callable[[], Reply]] = {
    "text": lambda: Reply.text("hello there friend"),
    "chunks": lambda: Reply.text("a b c d", chunks=["a", " b c", " d"]),
    "empty text": lambda: Reply.text(""),
    "function call": lambda: Reply.tool_call("get_weather", {"city": "Paris"}),
    "parallel calls": lambda: Reply.tool_calls([("f", {"a": 1}), ("g", "{}")]),
    "text then call": lambda: Reply.text("let me check") + Reply.tool_call("f", {}),
    "reasoning": lambda: Reply.text("ok", reasoning="one two three"),
    "reasoning call": lambda: Reply.tool_call("f", {}, reasoning="plan"),
    "incomplete": lambda: Reply.text("cut off here").as_incomplete(),
    "refusal": lambda: Reply.items([REFUSAL]),
    "two parts": lambda: Reply.items([TWO_PARTS]),
    "custom tool call": lambda: Reply.items([CUSTOM_CALL]),
}


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])
@pytest.mark.parametrize("kind", sorted(REPLIES))
async def test_every_reply_kind_is_a_strict_response(
    wire: Wire, kind: str, model: str, streamed: bool
) -> None:
    wire.mock.enqueue(REPLIES[kind]())
    include = ["reasoning.encrypted_content"] if model == "gpt-5" else None
    status, _ = await wire.create(model=model, input="hi", stream=streamed, include=include)
    assert status == 200
    await wire.call("GET", "/responses/resp_1")
    await wire.call("GET", "/responses/resp_1/input_items")
    assert_strict(wire)


def _output_text_parts(body: Any) -> list[dict[str, Any]]:
    """Every ``output_text`` part inside ``body`` (a response, an event, a list of events)."""
    if isinstance(body, list):
        return [part for entry in body for part in _output_text_parts(entry)]
    if not isinstance(body, dict):
        return []
    found = [body] if body.get("type") == "output_text" else []
    for value in body.values():
        found += _output_text_parts(value)
    return found


@pytest.mark.parametrize("streamed", [False, True])
async def test_output_text_parts_carry_empty_logprobs(wire: Wire, streamed: bool) -> None:
    """openai types ``ResponseOutputText.logprobs`` as optional, so strictness cannot see it
    missing; the API sends ``logprobs: []`` when not asked for them [doc: openai-openapi
    ``OutputTextContent``, required]."""
    wire.mock.enqueue(Reply.text("hello there"), Reply.items([TWO_PARTS]))
    await wire.create(input="hi", stream=streamed)
    await wire.create(input="again", previous_response_id="resp_1", stream=streamed)
    await wire.call("GET", "/responses/resp_2")
    parts = [part for _, _, body in wire.seen for part in _output_text_parts(body)]
    assert len(parts) >= 3
    assert [part for part in parts if part.get("logprobs") != []] == []
    assert_strict(wire)


async def test_a_chain_with_tool_outputs_and_conversations_is_strict(wire: Wire) -> None:
    mock = wire.mock
    mock.enqueue(Reply.tool_call("f", {"x": 1}, call_id="call_a"), Reply.text("done"))
    await wire.create(input="first", stream=True)
    output = {"type": "function_call_output", "call_id": "call_a", "output": "42"}
    await wire.create(input=[output], previous_response_id="resp_1")
    await wire.call("GET", "/responses/resp_1/input_items", order="asc", limit=1)
    status, conversation = await wire.call(
        "POST", "/conversations", {"items": [{"role": "user", "content": "hello"}]}
    )
    assert status == 200
    conv = conversation["id"]
    await wire.create(input="more", conversation=conv, stream=True)
    await wire.call("POST", f"/conversations/{conv}", {"metadata": {"k": "v"}})
    item = {"type": "message", "role": "assistant", "content": "noted"}
    await wire.call("POST", f"/conversations/{conv}/items", {"items": [item]})
    _, page = await wire.call("GET", f"/conversations/{conv}/items", order="asc")
    first = page["data"][0]["id"]
    await wire.call("GET", f"/conversations/{conv}/items/{first}")
    await wire.call("DELETE", f"/conversations/{conv}/items/{first}")
    await wire.call("GET", f"/conversations/{conv}")
    await wire.call("POST", "/responses/compact", {"model": "gpt-4.1", "input": "a long talk"})
    await wire.call("DELETE", "/responses/resp_2")
    await wire.call("DELETE", f"/conversations/{conv}")
    assert_strict(wire)


async def test_empty_pages_are_strict(wire: Wire) -> None:
    _, conversation = await wire.call("POST", "/conversations", {})
    conv = conversation["id"]
    await wire.call("GET", f"/conversations/{conv}/items")
    await wire.call("POST", f"/conversations/{conv}/items", {"items": []})
    await wire.create(input="hi")
    _, page = await wire.call("GET", "/responses/resp_1/input_items")
    await wire.call("GET", "/responses/resp_1/input_items", after=page["last_id"])
    pages = [body for where, _, body in wire.seen if "items" in where and "data" in body]
    assert [len(body["data"]) for body in pages] == [0, 0, 1, 0]
    assert_strict(wire)


async def test_error_bodies_are_strict(wire: Wire) -> None:
    await wire.create(input="x", previous_response_id="resp_unknown")
    await wire.create(input=[{"type": "function_call_output", "call_id": "nope", "output": ""}])
    await wire.call("GET", "/responses/resp_unknown")
    await wire.call("GET", "/responses/resp_unknown/input_items")
    await wire.call("GET", "/conversations/conv_unknown/items")
    await wire.call("POST", "/responses", [1, 2])
    await wire.call("GET", "/nowhere")
    assert [status for _, status, _ in wire.seen] == [400, 400, 404, 404, 404, 400, 404]
    assert_strict(wire)


FAULTS: dict[str, Callable[[int], Fault]] = {
    "status 500": lambda _: Fault.status(500),
    "status 400 code": lambda _: Fault.status(400, "bad", error_code="invalid_value"),
    "rate limit": lambda _: Fault.rate_limit(retry_after=2),
    "timeout": lambda _: Fault.timeout(),
    "connect error": lambda _: Fault.connect_error(),
    "delay": lambda _: Fault.delay(0),
    "status commit": lambda _: Fault.status(502, commit=True),
    "drop": Fault.drop_mid_stream,
    "drop commit": lambda k: Fault.drop_mid_stream(k, commit=True),
    "stream error": Fault.stream_error,
    "response failed": Fault.response_failed,
    "response failed body": lambda k: Fault.response_failed(k, body=True),
}


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("kind", sorted(FAULTS))
async def test_every_fault_kind_sends_strict_bodies(kind: str, streamed: bool) -> None:
    """Each fault at every frame of a reasoning answer with text and a call."""
    reply = Reply.text("a b c", reasoning="think") + Reply.tool_call("f", {"x": 1})
    async with (
        MockResponsesAPI(reasoning=True) as mock,
        httpx2.AsyncClient(transport=mock.transport) as http,
    ):
        mock.enqueue(reply)
        _, events = await Wire(mock, http).create(input="hi", stream=True)
        for after in range(len(events) + 1) if streamed else range(1):
            mock.reset()
            wire = Wire(mock, http)
            mock.enqueue(reply)
            mock.inject(FAULTS[kind](after))
            await wire.create(input="hi", stream=streamed)
            found = check_all(wire.seen, KINDS)
            assert found == [], f"after {after}: {found}"


def test_the_checker_catches_a_missing_and_an_unknown_field() -> None:
    event = {
        "type": "response.output_text.delta",
        "sequence_number": 0,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "x",
    }
    assert event_problems(event, "e") != []  # no logprobs
    assert event_problems({**event, "logprobs": []}, "e") == []
    [extra] = event_problems({**event, "logprobs": [], "colour": 1}, "e")
    assert extra.endswith(".colour")
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    details = {"input_tokens_details": {"cached_tokens": 0}}
    out = {"output_tokens_details": {"reasoning_tokens": 0}}
    from openai.types.responses import ResponseUsage

    assert problems(ResponseUsage, {**usage, **details, **out}, "u") != []  # cache_write_tokens
