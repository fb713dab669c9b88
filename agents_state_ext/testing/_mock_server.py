"""``MockResponsesAPI``: a stateful fake of the Responses and Conversations APIs.

It is an ``httpx2.MockTransport`` (the HTTP library openai itself uses), so it needs no patching
library; ``router`` also mounts it on respx for classic ``httpx`` clients, importing respx only
then.
"""

from __future__ import annotations

import asyncio
import copy
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2
from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel
from openai import AsyncOpenAI

from ._faults import Fault
from ._records import FrameHook, RecordedRequest
from ._replies import Reply
from ._responses import Responder
from ._routes import Backend

if TYPE_CHECKING:
    import respx

__all__ = ["DEFAULT_BASE_URL", "MockResponsesAPI"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class MockResponsesAPI:
    """A stateful fake of ``/responses`` and ``/conversations`` for tests, an HTTP transport.

    ``POST /chat/completions`` is faked too, statelessly, from the same queues (see
    :meth:`chat_model` and :attr:`chat_requests`).

    Use it as a (sync or async) context manager: while it is started, the clients from
    :meth:`client` and :meth:`model` (and any ``httpx2.AsyncClient(transport=mock.transport)``)
    reach it; unknown paths under ``base_url`` get the API's 404, other hosts fail loudly.
    Leaving stops it and closes the clients it created (in a running event loop prefer
    ``async with``: a sync exit can only schedule the close). Nothing is patched: a client
    built elsewhere (a default ``AsyncOpenAI()``) is never intercepted, unless it is a classic
    ``httpx`` client and :attr:`router` (respx) was asked for.

    ``POST /responses`` answers with the queued replies (:meth:`enqueue`) in order, then with
    ``responder`` if set, else with ``Reply.text("echo: <text>")``, where ``<text>`` is the last
    user message of this request's input (else of the context; else empty). Faults
    (:meth:`inject`) are consumed first, one per ``POST /responses``. A rejected request, or one
    failing with a fault without ``commit``, consumes no reply: a retry gets the same one. A
    request the server processes (``commit=True`` or ``drop_mid_stream``) that it must reject
    gets the rejection, and the fault is used up.

    All ids are deterministic counters per prefix (``resp_1``, ``msg_1``, ``fc_1``, ``call_1``,
    ``fco_1``, ``conv_1``, ``cmp_1``), never reusing an id a client sent; ``created_at`` is fixed.

    Flags for behaviour the real service leaves unclear:

    - ``previous_response_not_found_status``: the status for an unknown
      ``previous_response_id`` (the live API was observed to answer 400).
    - ``store_interrupted_streams``: a stream the client leaves before ``response.completed``
      is still stored as completed (retrievable, chainable) but adds nothing to its
      conversation, as observed once live; default: nothing is stored.
    - ``lock_conversations`` (default on, as the real API): a second ``POST /responses`` on a
      conversation while one is in flight gets ``400 conversation_locked``, param
      ``conversation`` [obs: the live body quoted in paulgmiller/careme#379; the Agents SDK
      retries this code 3 times, 1/2/4 s apart, ``agents/run_internal/model_retry.py``].
    - ``reject_orphan_tool_calls``: reject a request whose context has a function call without
      output ("No tool output found for function call ...").
    - ``append_incomplete_to_conversation``: an ``incomplete`` response (see
      ``Reply.as_incomplete``) appends its input and partial output to its conversation.

    Reasoning models, as today's real API serves them:

    - ``reasoning``: None (default) decides by the request's ``model``: a reasoning family
      (``gpt-5*``, ``o1*``, ``o3*``, ``o4*``, ``codex*``) answers with one reasoning item
      (``rs_N``) first when the reply has none [doc: reasoning guide, "reasoning items" come
      before the message or call they led to]; True or False forces it for every model.
      ``encrypted_content`` is sent only when ``include`` asks for
      ``reasoning.encrypted_content`` [doc]; it is ``enc1.<base64url JSON>.<digest>``, opaque
      and tamper-checked (400 ``invalid_encrypted_content`` [obs], openai/codex#8145).
      Reasoning words count as ``output_tokens_details.reasoning_tokens``.
    - ``enforce_reasoning_rules``: the 400/404 answers for reasoning items (see
      ``_reasoning_rules``): an output item sent back by id without the reasoning item it
      belongs to, a reasoning item not followed by an output item, a reasoning id the server
      does not hold (``store=False``, expired, unknown) without ``encrypted_content``, a
      reasoning item with neither, and ``include`` of encrypted content on a non-reasoning
      model (unless ``reasoning=True``).

    Request validation, as the real service does it before it looks at any state:

    - ``validate_requests`` (on by default): ``POST /responses``, ``POST /responses/compact``
      (over ``ResponseCompactParams``), ``POST /conversations`` and
      ``POST /conversations/{id}/items`` get the API's 400 for an unknown parameter (top level
      or on an input item, by the installed openai types), an unknown item ``type``, a role
      outside ``assistant``/``system``/``developer``/``user`` (``tool`` included), an item id
      without its type's prefix (``msg_``, ``fc_``, ``fco_``, ``rs_``, ``ctc_``, ``cmp_``),
      ``arguments`` that are not a string, a missing ``model``, and a context (stored history
      plus input, in ``usage`` words) over the model's window (``context_length_exceeded``);
      see ``_request_rules``. Such a rejection consumes no reply and no fault.

    Bodies follow the installed openai types (the mock's own tests validate them strictly):
    every ``output_text`` part carries ``logprobs: []``; an empty list page has ``first_id``
    and ``last_id`` null, as the live API sends for lists openai types the same way (see
    ``_conversations.list_page`` for the sources).
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        model: str = "gpt-4.1",
        previous_response_not_found_status: int = 400,
        store_interrupted_streams: bool = False,
        lock_conversations: bool = True,
        reject_orphan_tool_calls: bool = True,
        append_incomplete_to_conversation: bool = True,
        reasoning: bool | None = None,
        enforce_reasoning_rules: bool = True,
        validate_requests: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.default_model = model
        parts = urlsplit(self.base_url)
        self._scheme, self._host, self._prefix = parts.scheme, parts.hostname or "", parts.path
        self._backend = Backend(
            self._prefix,
            model=model,
            state_flags={
                "previous_response_not_found_status": previous_response_not_found_status,
                "reject_orphan_tool_calls": reject_orphan_tool_calls,
                "model": model,
                "reasoning": reasoning,
                "enforce_reasoning_rules": enforce_reasoning_rules,
            },
            endpoint_flags={
                "store_interrupted_streams": store_interrupted_streams,
                "lock_conversations": lock_conversations,
                "append_incomplete": append_incomplete_to_conversation,
            },
            validate_requests=validate_requests,
        )
        self._transport = httpx2.MockTransport(self._handle)
        self._started = False
        self._http_clients: list[httpx2.AsyncClient] = []
        self._shared_client: AsyncOpenAI | None = None
        self._router: respx.MockRouter | None = None
        self._closing: asyncio.Task[None] | None = None

    # -- scripting ----------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order."""
        return self._backend.requests

    def reset(self) -> None:
        """Forget all state: stored responses, conversations, ids, queues, responder, log."""
        self._backend.reset()

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies; each answered ``POST /responses`` consumes the first."""
        self._backend.responses.replies.extend(replies)

    def inject(self, fault: Fault, *, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` ``POST /responses`` requests (after others)."""
        self._backend.responses.faults.extend([fault] * times)

    def clear_faults(self) -> list[Fault]:
        """Drop the faults still queued and return them (e.g. ones a run never reached)."""
        faults = list(self._backend.responses.faults)
        self._backend.responses.faults.clear()
        return faults

    @property
    def responder(self) -> Responder | None:
        """Called for a reply when the queue is empty; None: the echo reply."""
        return self._backend.responses.responder

    @responder.setter
    def responder(self, value: Responder | None) -> None:
        self._backend.responses.responder = value

    @property
    def frame_hook(self) -> FrameHook | None:
        """Awaited as ``hook(request, sent)`` at each point of an answer in flight; None: off.

        For a streamed answer, before each SSE frame (``sent`` frames already sent) and once
        more with ``sent == len(events)`` when the client reads on after the last frame; for a
        non-streamed answer, once with 0 before the response is stored and sent. It runs in the
        client's task, so a test can cancel, checkpoint or fail a run at an exact point.
        """
        return self._backend.responses.frame_hook

    @frame_hook.setter
    def frame_hook(self, value: FrameHook | None) -> None:
        self._backend.responses.frame_hook = value

    @property
    def pending_replies(self) -> int:
        """Replies still queued."""
        return len(self._backend.responses.replies)

    @property
    def pending_faults(self) -> int:
        """Faults still queued."""
        return len(self._backend.responses.faults)

    # -- clients ------------------------------------------------------------------------------

    @property
    def transport(self) -> httpx2.MockTransport:
        """The ``httpx2`` transport that answers as this mock, for a client of your own."""
        return self._transport

    def client(self, **kwargs: Any) -> AsyncOpenAI:
        """A new ``AsyncOpenAI`` on an ``httpx2.AsyncClient`` whose transport is this mock.

        Defaults: ``api_key="sk-test"``, this mock's ``base_url``, ``max_retries=0``; any
        keyword overrides them. The mock closes the HTTP client when its context exits.
        """
        http_client = httpx2.AsyncClient(transport=self._transport)
        self._http_clients.append(http_client)
        options: dict[str, Any] = {
            "api_key": "sk-test",
            "base_url": self.base_url,
            "max_retries": 0,
            "http_client": http_client,
            **kwargs,
        }
        return AsyncOpenAI(**options)

    def model(self, name: str | None = None) -> OpenAIResponsesModel:
        """An ``OpenAIResponsesModel`` for ``name`` (default: the mock's model), shared client."""
        if self._shared_client is None:
            self._shared_client = self.client()
        return OpenAIResponsesModel(
            model=name or self.default_model, openai_client=self._shared_client
        )

    def chat_model(self, name: str | None = None) -> OpenAIChatCompletionsModel:
        """An ``OpenAIChatCompletionsModel`` for ``name`` (default: the mock's model) on the mock.

        Its ``POST /chat/completions`` requests are answered from the same replies, faults,
        responder and frame hook as ``POST /responses``: a reply's messages become the choice's
        ``content``, its function calls the ``tool_calls`` (reasoning items are left out).
        Streamed, the answer comes as ``chat.completion.chunk`` frames then ``data: [DONE]``
        (with a usage chunk when ``stream_options.include_usage`` is set). Nothing is stored;
        ``validate_requests`` gives the API's 400s for an unknown parameter, a missing
        ``model`` or ``messages``, an unknown role, a ``tool`` message answering no call, and
        tool calls left without their ``tool`` messages.
        """
        if self._shared_client is None:
            self._shared_client = self.client()
        return OpenAIChatCompletionsModel(
            model=name or self.default_model, openai_client=self._shared_client
        )

    # -- server-side state --------------------------------------------------------------------

    @property
    def response_requests(self) -> list[Any]:
        """The JSON bodies of the ``POST /responses`` requests, in order: what crossed the wire."""
        return [r.json for r in self.requests if r.method == "POST" and r.path == "/responses"]

    @property
    def chat_requests(self) -> list[Any]:
        """The JSON bodies of the ``POST /chat/completions`` requests, in order."""
        return [
            r.json for r in self.requests if r.method == "POST" and r.path == "/chat/completions"
        ]

    @property
    def response_ids(self) -> list[str]:
        """Ids of the stored responses, in the order they were stored."""
        return list(self._backend.state.responses)

    def response(self, response_id: str) -> dict[str, Any]:
        """The stored Response object; ``KeyError`` when not stored."""
        return copy.deepcopy(self._backend.state.responses[response_id].body)

    def expire_response(self, response_id: str | None = None) -> list[str]:
        """Forget stored responses, as retention or a restarted server does; their ids are returned.

        ``None`` expires every stored response. A later request that names one of them as its
        ``previous_response_id`` gets the API's "previous response not found" error; the items
        it produced are forgotten too (a reasoning id among them then gets the 404 "Item with
        id ... not found").
        """
        state = self._backend.state
        ids = list(state.responses) if response_id is None else [response_id]
        for each in ids:
            if each not in state.responses:
                raise KeyError(each)
            state.forget_response(each)
        return ids

    def transcript(self, response_id: str) -> list[dict[str, Any]]:
        """The full server-side context of a stored response, its output last; ``KeyError``."""
        return copy.deepcopy(self._backend.state.responses[response_id].transcript)

    def conversation_items(self, conversation_id: str) -> list[dict[str, Any]]:
        """The items of a conversation in insertion order; ``KeyError`` when unknown."""
        return copy.deepcopy(self._backend.state.conversations[conversation_id].items)

    def create_conversation(
        self, items: list[dict[str, Any]] | None = None, metadata: dict[str, Any] | None = None
    ) -> str:
        """Create a conversation without HTTP (at most 20 items); return its id."""
        return self._backend.state.create_conversation(items, metadata).id

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def router(self) -> respx.MockRouter:
        """A respx router routing ``base_url`` to this mock, for classic ``httpx`` clients.

        Started on first use while the mock is started, and stopped with it; needs ``respx``
        (and ``httpx``), imported only here. Add routes for other hosts to it.
        """
        if not self._started:
            raise RuntimeError("the mock is not started; use `with mock:` or `async with mock:`")
        if self._router is None:
            from ._respx import start_router

            self._router = start_router(
                self._backend.dispatch, scheme=self._scheme, host=self._host, prefix=self._prefix
            )
        return self._router

    def start(self) -> None:
        """Start answering requests."""
        if self._started:
            raise RuntimeError("the mock is already started")
        self._started = True

    def stop(self) -> None:
        """Stop answering requests (clients are closed by the context exits)."""
        self._started = False
        if self._router is not None:
            self._router.stop(quiet=True)
            self._router = None

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        if not self._started:
            raise RuntimeError(
                f"MockResponsesAPI is not started: {request.method} {request.url} was not sent"
            )
        url = request.url
        if (url.scheme, url.host) != (self._scheme, self._host) or not url.path.startswith(
            self._prefix
        ):
            raise RuntimeError(
                f"{request.method} {url} not mocked: MockResponsesAPI serves {self.base_url}"
            )
        return await self._backend.dispatch(request)

    async def aclose(self) -> None:
        """Close the HTTP clients this mock created."""
        clients, self._http_clients = self._http_clients, []
        self._shared_client = None
        for http_client in clients:
            await http_client.aclose()

    def __enter__(self) -> MockResponsesAPI:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
        else:
            # Inside a running loop a sync exit cannot await; prefer `async with` there.
            self._closing = loop.create_task(self.aclose())

    async def __aenter__(self) -> MockResponsesAPI:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        await self.aclose()
