"""The seeded load driver: many conversations sending, stopping, retrying, editing, switching.

Each conversation is an asyncio task with its own seeded random source, talking HTTP (httpx2)
to a worker chosen at random per request. A share of the answers is stopped mid-stream by a
stop sent to *another* worker than the one streaming; a share is met by a second send on
another worker while it streams (which must be refused as busy, 409). A killer task SIGKILLs
a worker that streams and starts it again. The driver only writes down what it was told
(:class:`Tally`): the checks (:mod:`.checks`) compare that with the store and the mock.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx2

from .cluster import Cluster, Worker

__all__ = ["Accepted", "LoadDriver", "StopSample", "Tally"]

STRATEGIES = ("previous_response", "conversation", "replay", "session")
ACTIONS = ("send", "retry", "edit", "switch")
WEIGHTS = (6, 2, 2, 1)


@dataclass
class Accepted:
    """A send, retry or edit a worker answered 200 for, and what its stream said."""

    conversation_id: str
    kind: str
    content: str | None
    """The user text a send or edit carried (unique in the whole run), None for a retry."""
    worker: int
    user_id: str | None = None
    attempt_id: str | None = None
    message_id: str | None = None
    deltas: str = ""
    final: str | None = None
    """``record`` or ``error``: the stream's closing event; None when the stream was cut."""
    record: dict[str, Any] | None = None


@dataclass
class StopSample:
    """One stop sent to a worker other than the streaming one."""

    conversation_id: str
    attempt_id: str | None
    streaming_worker: int
    stop_worker: int
    requested_at: float
    """Wall-clock time the stop was sent (compared with the stored record's ``finished_at``)."""
    answer: Accepted
    """The answer stopped (``answer.final`` None: its stream was cut, its worker killed)."""
    status: int | None = None
    """The HTTP status of the stop (None: the connection failed)."""
    returned_after: float | None = None
    """Seconds until the stop's answer came back."""
    record: dict[str, Any] | None = None


@dataclass
class Tally:
    """Everything the driver did and was answered."""

    conversations: list[tuple[str, str, str]] = field(default_factory=list)
    """(conversation id, user, strategy) of every conversation created."""
    requests: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    """``"<action> <status>"`` -> count (status ``transport`` when the connection failed)."""
    accepted: list[Accepted] = field(default_factory=list)
    stops: list[StopSample] = field(default_factory=list)
    clashes: int = 0
    kills: list[dict[str, Any]] = field(default_factory=list)
    cut_streams: int = 0
    final_pass: Counter[str] = field(default_factory=Counter)

    @property
    def conflicts(self) -> int:
        """Requests refused with 409 (busy or conflict), stops with nothing to stop excluded."""
        return sum(
            n for key, n in self.answers.items() if key.endswith(" 409") and "stop" not in key
        )


class LoadDriver:
    """Drive ``cluster`` with ``conversations`` concurrent conversations for ``seconds``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        conversations: int,
        seconds: float,
        kills: int,
        seed: int,
        stop_share: float = 0.35,
        clash_share: float = 0.1,
        think: float = 0.3,
    ) -> None:
        self.cluster = cluster
        self.conversations = conversations
        self.seconds = seconds
        self.kills = kills
        self.seed = seed
        self.stop_share = stop_share
        self.clash_share = clash_share
        self.think = think
        self.tally = Tally()
        self._down: set[int] = set()
        self._streaming: Counter[int] = Counter()
        self._serial = 0
        self._client: httpx2.AsyncClient | None = None

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> Tally:
        """Run the load, then the final pass; what happened."""
        timeout = httpx2.Timeout(60.0, connect=5.0)
        limits = httpx2.Limits(max_connections=4 * self.conversations + 20)
        async with httpx2.AsyncClient(trust_env=False, timeout=timeout, limits=limits) as client:
            self._client = client
            deadline = time.monotonic() + self.seconds
            tasks = [self._converse(i, deadline) for i in range(self.conversations)]
            await asyncio.gather(self._killer(deadline), *tasks)
            await self._final_pass()
        return self.tally

    def _alive(self, rng: random.Random, *, other_than: int | None = None) -> Worker:
        candidates = [
            w for w in self.cluster.workers if w.index not in self._down and w.index != other_than
        ]
        if not candidates:  # only the streaming one is up: aim at any other, it may be back
            candidates = [w for w in self.cluster.workers if w.index != other_than]
        return rng.choice(candidates)

    def _content(self, index: int, kind: str) -> str:
        self._serial += 1
        return f"c{index} {kind} m{self._serial} please count slowly to ten"

    async def _request(
        self, action: str, worker: Worker, method: str, path: str, user: str, body: Any = None
    ) -> tuple[int | None, Any]:
        assert self._client is not None
        self.tally.requests += 1
        try:
            response = await self._client.request(
                method, worker.base_url + path, json=body, headers={"X-User-Id": user}
            )
        except httpx2.TransportError:
            self.tally.answers[f"{action} transport"] += 1
            return None, None
        self.tally.answers[f"{action} {response.status_code}"] += 1
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    # -- one conversation ---------------------------------------------------------------------

    async def _converse(self, index: int, deadline: float) -> None:
        rng = random.Random(f"{self.seed}:conversation:{index}")
        user = f"user{index % 5}"
        strategy = STRATEGIES[index % len(STRATEGIES)]
        cid = None
        while cid is None:
            status, body = await self._request(
                "create",
                self._alive(rng),
                "POST",
                "/api/conversations",
                user,
                {"strategy": strategy, "system": "you count"},
            )
            if status == 201:
                cid = str(body["id"])
            else:
                await asyncio.sleep(0.2)
        self.tally.conversations.append((cid, user, strategy))
        sent = 0
        while time.monotonic() < deadline:
            action = "send" if sent == 0 else rng.choices(ACTIONS, WEIGHTS)[0]
            if action == "send":
                content = self._content(index, "send")
                await self._answer(
                    rng, cid, user, "send", "messages", {"content": content}, content
                )
                sent += 1
            elif action == "retry":
                await self._answer(rng, cid, user, "retry", "retry", {}, None)
            elif action == "edit":
                await self._edit(rng, index, cid, user)
            else:
                await self._switch(rng, cid, user)
            await asyncio.sleep(rng.uniform(0, self.think))

    async def _edit(self, rng: random.Random, index: int, cid: str, user: str) -> None:
        status, shown = await self._request(
            "show", self._alive(rng), "GET", f"/api/conversations/{cid}", user
        )
        if status != 200:
            return
        users = [n["id"] for n in shown["active_path"] if n["role"] == "user"]
        if not users:
            return
        content = self._content(index, "edit")
        body = {"user_id": rng.choice(users), "content": content}
        await self._answer(rng, cid, user, "edit", "edit", body, content)

    async def _switch(self, rng: random.Random, cid: str, user: str) -> None:
        status, tree = await self._request(
            "tree", self._alive(rng), "GET", f"/api/conversations/{cid}/tree", user
        )
        if status != 200:
            return
        targets = [
            n["id"]
            for n in tree["nodes"]
            if n["role"] == "assistant" and n["status"] in ("complete", "cancelled", "failed")
        ]
        if targets:
            await self._request(
                "switch",
                self._alive(rng),
                "POST",
                f"/api/conversations/{cid}/switch",
                user,
                {"node_id": rng.choice(targets)},
            )

    # -- an answer, and what may happen to it meanwhile ---------------------------------------

    async def _answer(
        self,
        rng: random.Random,
        cid: str,
        user: str,
        kind: str,
        route: str,
        body: dict[str, Any],
        content: str | None,
        *,
        extras: bool = True,
    ) -> None:
        """POST an answering action on a random worker and read its SSE stream to the end."""
        assert self._client is not None
        worker = self._alive(rng)
        stop = extras and rng.random() < self.stop_share
        clash = extras and not stop and rng.random() < self.clash_share
        streamed = rng.random() < 0.85
        pending: list[asyncio.Task[Any]] = []
        accepted: Accepted | None = None
        self.tally.requests += 1
        url = f"{worker.base_url}/api/conversations/{cid}/{route}"
        try:
            async with self._client.stream(
                "POST", url, json={**body, "stream": streamed}, headers={"X-User-Id": user}
            ) as response:
                self.tally.answers[f"{kind} {response.status_code}"] += 1
                if response.status_code != 200:
                    await response.aread()
                    return
                accepted = Accepted(cid, kind, content, worker.index)
                self.tally.accepted.append(accepted)
                self._streaming[worker.index] += 1
                try:
                    async for name, data in _events(response):
                        _note(accepted, name, data)
                        trigger = name == "delta" or (name == "attempt" and not streamed)
                        if trigger and stop:
                            stop = False
                            stopping = self._stop(rng, cid, user, worker.index, accepted)
                            pending.append(asyncio.ensure_future(stopping))
                        if trigger and clash:
                            clash = False
                            pending.append(asyncio.ensure_future(self._clash(rng, cid, user)))
                finally:
                    self._streaming[worker.index] -= 1
        except httpx2.TransportError:
            if accepted is not None:
                self.tally.cut_streams += 1
            else:
                self.tally.answers[f"{kind} transport"] += 1
        if pending:
            await asyncio.gather(*pending)

    async def _stop(
        self, rng: random.Random, cid: str, user: str, streaming: int, answer: Accepted
    ) -> None:
        worker = self._alive(rng, other_than=streaming)
        sample = StopSample(cid, answer.attempt_id, streaming, worker.index, time.time(), answer)
        self.tally.stops.append(sample)
        started = time.monotonic()
        status, body = await self._request(
            "stop", worker, "POST", f"/api/conversations/{cid}/stop", user
        )
        sample.status = status
        sample.returned_after = time.monotonic() - started
        if status == 200:
            sample.record = body

    async def _clash(self, rng: random.Random, cid: str, user: str) -> None:
        """A second driver: a send on another worker while the answer streams."""
        self.tally.clashes += 1
        content = self._content(-1, "clash")
        other = random.Random(rng.random())
        await self._answer(
            other, cid, user, "clash", "messages", {"content": content}, content, extras=False
        )

    # -- killing workers ----------------------------------------------------------------------

    async def _killer(self, deadline: float) -> None:
        if self.kills <= 0:
            return
        rng = random.Random(f"{self.seed}:kills")
        start = time.monotonic()
        span = deadline - start
        times = sorted(
            start + span * (i + rng.uniform(0.2, 0.8)) / self.kills for i in range(self.kills)
        )
        for at in times:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            busy = [i for i, n in self._streaming.items() if n > 0 and i not in self._down]
            index = rng.choice(sorted(busy)) if busy else rng.randrange(len(self.cluster.workers))
            worker = self.cluster.workers[index]
            self._down.add(index)
            streams = self._streaming[index]
            await asyncio.to_thread(self.cluster.kill, worker)
            self.tally.kills.append(
                {"worker": index, "at": round(time.monotonic() - start, 2), "streams": streams}
            )
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            await asyncio.to_thread(self.cluster.restart, worker)
            await asyncio.to_thread(self.cluster.wait_ready, worker)
            self._down.discard(index)

    # -- the final pass -----------------------------------------------------------------------

    async def _final_pass(self) -> None:
        """Let every lease lapse, then touch every conversation so recovery runs where needed.

        A stop on a conversation nobody drives closes what a dead worker left in flight (409
        when there is nothing to stop).
        """
        await asyncio.sleep(self.cluster.lease_ttl + 1.0)
        rng = random.Random(f"{self.seed}:final")
        for cid, user, _ in self.tally.conversations:
            status, _ = await self._request(
                "final-stop", self._alive(rng), "POST", f"/api/conversations/{cid}/stop", user
            )
            self.tally.final_pass[str(status)] += 1


def _note(accepted: Accepted, name: str, data: Any) -> None:
    if name == "attempt":
        accepted.attempt_id = data.get("attempt_id")
        accepted.message_id = data.get("message_id")
        accepted.user_id = data.get("user_id")
    elif name == "delta":
        accepted.deltas += data.get("text", "")
    elif name in ("record", "error"):
        accepted.final = name
        accepted.record = data if name == "record" else data.get("record")
        if name == "error" and data.get("attempt_id"):
            accepted.attempt_id = data["attempt_id"]


async def _events(response: httpx2.Response) -> Any:
    """The SSE events ``(name, data)`` of a response as they arrive (comments skipped)."""
    name, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
