"""``MockServer``: the mock Responses API as its own process, on a loopback port."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
from openai import AsyncOpenAI

from ..errors import MockServerError
from ._admin import ADMIN_PREFIX, request_from_dict
from ._faults import Fault
from ._records import RecordedRequest
from ._replies import Reply

__all__ = ["MockServer", "MockServerError"]

_LOG_TAIL = 4000


def _end(process: subprocess.Popen[bytes], grace: float) -> None:
    """Terminate ``process``, kill it after ``grace`` seconds, and reap it (no zombie)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


class MockServer:
    """The stateful mock (:class:`MockResponsesAPI`) served over HTTP by a child process.

    ``with MockServer() as server:`` (or ``async with``) starts ``python -m
    agents_state_ext.testing serve-mock`` on ``host`` and ``port`` (0: a free one), waits until
    it answers, and stops it on exit (SIGTERM, then SIGKILL after ``stop_timeout`` seconds).
    Any process reaches it at :attr:`base_url`; the child also stops if this process dies.

    The methods mirror ``MockResponsesAPI`` (``enqueue``, ``inject``, ``requests``,
    ``transcript``, ...) as blocking loopback calls to private ``/__mock__`` routes, so they
    read the same in sync and async tests. The options are the mock's (``lock_conversations``
    and ``validate_requests`` on by default, as there); ``responder``
    (``"module:function"``, imported in the server) or ``echo_delay`` (the echo, one word per
    streamed frame, this many seconds apart) replace the default echo, also after ``reset``.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "gpt-4.1",
        responder: str | None = None,
        echo_delay: float = 0.0,
        previous_response_not_found_status: int = 400,
        store_interrupted_streams: bool = False,
        lock_conversations: bool = True,
        reject_orphan_tool_calls: bool = True,
        append_incomplete_to_conversation: bool = True,
        validate_requests: bool = True,
        startup_timeout: float = 30.0,
        stop_timeout: float = 5.0,
    ) -> None:
        self.host, self.default_model = host, model
        self._port = port
        self._args = ["--host", host, "--model", model, "--echo-delay", str(echo_delay)]
        self._args += [
            "--previous-response-not-found-status",
            str(previous_response_not_found_status),
        ]
        if responder is not None:
            self._args += ["--responder", responder]
        if store_interrupted_streams:
            self._args.append("--store-interrupted-streams")
        if not lock_conversations:
            self._args.append("--no-lock-conversations")
        if not reject_orphan_tool_calls:
            self._args.append("--no-reject-orphan-tool-calls")
        if not append_incomplete_to_conversation:
            self._args.append("--no-append-incomplete-to-conversation")
        if not validate_requests:
            self._args.append("--no-validate-requests")
        self.startup_timeout, self.stop_timeout = startup_timeout, stop_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._logs: tempfile.TemporaryDirectory[str] | None = None
        self._admin: httpx2.Client | None = None
        self._base_url = ""
        self._reaper: weakref.finalize[Any, Any] | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API's base URL, ``http://127.0.0.1:PORT/v1`` (``OPENAI_BASE_URL`` for a client)."""
        self._running()
        return self._base_url

    @property
    def port(self) -> int:
        """The port served on (the one chosen, once started with ``port=0``)."""
        return int(self._base_url.rsplit(":", 1)[1].split("/")[0]) if self._base_url else self._port

    @property
    def pid(self) -> int:
        """The server process's id."""
        return self._running().pid

    def start(self) -> None:
        """Start the server process and wait until it answers (``startup_timeout``)."""
        if self._process is not None:
            raise RuntimeError("the mock server is already started")
        self._logs = tempfile.TemporaryDirectory(prefix="mock-server-")
        logs = Path(self._logs.name)
        command = [sys.executable, "-m", "agents_state_ext.testing", "serve-mock"]
        command += [*self._args, "--port", str(self._port), "--parent-pid", str(os.getpid())]
        # The child imports what this process can (the package, a responder's module).
        path = [entry or os.getcwd() for entry in sys.path]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env
            )
        self._reaper = weakref.finalize(self, _end, self._process, self.stop_timeout)
        try:
            self._await_ready(time.monotonic() + self.startup_timeout)
        except BaseException:
            self._shutdown()
            raise

    def _await_ready(self, deadline: float) -> None:
        while not self._base_url:
            announced = self._log("stdout")
            if announced.endswith("\n"):
                self._base_url = announced.splitlines()[0].strip()
            else:
                self._check_alive("before it announced its address")
                if time.monotonic() > deadline:
                    raise MockServerError(self._report("did not announce its address in time"))
                time.sleep(0.02)
        origin = self._base_url.rsplit("/", 1)[0]
        self._admin = httpx2.Client(base_url=origin + ADMIN_PREFIX, trust_env=False, timeout=30)
        while True:
            try:
                if self._admin.get("/health", timeout=1).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            self._check_alive("before it answered")
            if time.monotonic() > deadline:
                raise MockServerError(self._report("did not answer in time"))
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server process and reap it; ``MockServerError`` if it had died already."""
        process = self._process
        if process is None:
            return
        crash = None
        if process.poll() is not None:
            crash = self._report(f"had exited with code {process.returncode}")
        self._shutdown()
        if crash is not None:
            raise MockServerError(crash)

    def _shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper()  # ends and reaps the process, once
        if self._admin is not None:
            self._admin.close()
        if self._logs is not None:
            self._logs.cleanup()
        self._process, self._admin, self._logs, self._reaper = None, None, None, None
        self._base_url = ""

    def _log(self, name: str) -> str:
        if self._logs is None:
            return ""
        return (Path(self._logs.name) / name).read_bytes().decode(errors="replace")

    def _report(self, what: str) -> str:
        output = self._log("stderr")[-_LOG_TAIL:].strip() or "(no output)"
        return f"the mock server process {what}; its output:\n{output}"

    def _check_alive(self, when: str = "", *, wait: float = 0.0) -> None:
        process = self._running()
        if wait:
            try:
                process.wait(wait)
            except subprocess.TimeoutExpired:
                return
        if process.poll() is not None:
            code = f"exited with code {process.returncode}"
            raise MockServerError(self._report(f"{code} {when}" if when else code))

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("the mock server is not started; use `with MockServer() as s:`")
        return self._process

    def __enter__(self) -> MockServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.stop()
        else:
            self._shutdown()  # the body's error wins over a crash report

    async def __aenter__(self) -> MockServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.__exit__, exc_type, exc, tb)

    # -- clients ------------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> AsyncOpenAI:
        """A new ``AsyncOpenAI`` for this server; close it (``async with``) in its event loop.

        Defaults: ``api_key="sk-test"``, :attr:`base_url`, ``max_retries=0``; any keyword
        overrides them (e.g. ``timeout=`` to see an injected timeout).
        """
        options: dict[str, Any] = {
            "api_key": "sk-test",
            "base_url": self.base_url,
            "max_retries": 0,
            **kwargs,
        }
        return AsyncOpenAI(**options)

    # -- admin calls --------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, *, key: str | None = None) -> Any:
        self._check_alive()
        admin = self._admin
        if admin is None:
            raise RuntimeError("the mock server is not started; use `with MockServer() as s:`")
        try:
            response = admin.request(method, path, json=body)
        except httpx2.TransportError as error:
            # A refused connection may come a moment before the dead process can be reaped.
            self._check_alive(f"(seen during {method} {path})", wait=1.0)
            raise MockServerError(
                f"the mock server did not answer {method} {path}: {error!r}"
            ) from error
        if response.status_code == 404 and key is not None:
            raise KeyError(key)
        if response.status_code >= 400:
            message = response.json().get("error", {}).get("message", response.text)
            status = response.status_code
            raise MockServerError(f"{method} {ADMIN_PREFIX}{path}: {status} {message}")
        return response.json()

    def reset(self) -> None:
        """Forget all state, queues and the log; the server's own responder is restored."""
        self._call("POST", "/reset")

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies; each answered ``POST /responses`` consumes the first."""
        self._call("POST", "/replies", {"replies": [reply.to_dict() for reply in replies]})

    def inject(self, fault: Fault, *, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` ``POST /responses`` requests (after others).

        Over a socket a ``timeout`` holds the request until the client's own timeout, and a
        ``connect_error`` closes the connection without an answer (openai:
        ``APIConnectionError`` both ways).
        """
        self._call("POST", "/faults", {"fault": fault.to_dict(), "times": times})

    def clear_faults(self) -> list[Fault]:
        """Drop the faults still queued and return them."""
        return [Fault.from_dict(fault) for fault in self._call("DELETE", "/faults")]

    def set_responder(self, responder: str | None = None, *, echo_delay: float = 0.0) -> None:
        """Answer with ``"module:function"`` (imported in the server) when the queue is empty;
        None: the echo (slowed by ``echo_delay``). A reset restores the server's own."""
        self._call("POST", "/responder", {"responder": responder, "echo_delay": echo_delay})

    @property
    def pending_replies(self) -> int:
        """Replies still queued."""
        return int(self._call("GET", "/queues")["replies"])

    @property
    def pending_faults(self) -> int:
        """Faults still queued."""
        return int(self._call("GET", "/queues")["faults"])

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (a copy, read now)."""
        return [request_from_dict(record) for record in self._call("GET", "/requests")]

    @property
    def response_requests(self) -> list[Any]:
        """The JSON bodies of the ``POST /responses`` requests, in order."""
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
        return list(self._call("GET", "/responses"))

    def response(self, response_id: str) -> dict[str, Any]:
        """The stored Response object; ``KeyError`` when not stored."""
        return dict(self._call("GET", f"/responses/{response_id}", key=response_id))

    def expire_response(self, response_id: str | None = None) -> list[str]:
        """Forget stored responses (None: all) as retention does; their ids are returned."""
        path = "/responses" if response_id is None else f"/responses/{response_id}"
        return list(self._call("DELETE", path, key=response_id))

    def transcript(self, response_id: str) -> list[dict[str, Any]]:
        """The full server-side context of a stored response, its output last; ``KeyError``."""
        return list(self._call("GET", f"/responses/{response_id}/transcript", key=response_id))

    def conversation_items(self, conversation_id: str) -> list[dict[str, Any]]:
        """The items of a conversation in insertion order; ``KeyError`` when unknown."""
        path = f"/conversations/{conversation_id}/items"
        return list(self._call("GET", path, key=conversation_id))

    def create_conversation(
        self,
        items: list[dict[str, Any]] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Create a conversation without the API (at most 20 items); return its id."""
        body = {"items": items, "metadata": dict(metadata) if metadata is not None else None}
        return str(self._call("POST", "/conversations", body)["id"])
