"""Event-loop lag of the served app while three clients each send a 900 kB message (issue 28).

One worker's event loop serves every request: a message whose copies and token counts run on
the loop stalls every other stream and request of that worker for as long. Three clients
each create a conversation and send one message of ``--size`` bytes at once; beside them a
ticker sleeps ``TICK`` seconds in a loop and records how late each wake-up is. Reported per
round: the worst and the p99 lateness, and the wall time of the three sends; then the median
of the rounds (after an untimed round that loads the token encoding). The app is the one
``serve`` builds by default: a SQLite file store and the exact token counter; the model is
the mock server in its own process (``serve-mock``, answering "noted."), so its work is not
on the app's loop.

    python -m bench.bench_server_loop                             # 5 rounds, 3 x 900 kB
    python -m bench.bench_server_loop --max-message-bytes 1048576 # the limit before issue 28
    python -m bench.bench_server_loop --size 250000               # 3 x 250 kB: under the default

Not a test and not part of ``python -m bench``: it measures this machine's loop under load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TICK = 0.005
SENDERS = 3
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "


def message(size: int) -> str:
    """Plain text of ``size`` bytes: words, as a pasted document would be."""
    return (WORDS * (size // len(WORDS) + 1))[:size]


async def _ticker(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(TICK)
        lags.append(loop.time() - before - TICK)


def short_reply(context: Any) -> Any:
    """The mock server's answer to every message (``--responder``): short, so the bench
    measures the message the client sent, not a long answer."""
    from agents_state_ext.testing import Reply

    return Reply.text("noted.")


async def one_round(
    size: int, folder: Path, number: int, mock_url: str, limit: int | None
) -> dict[str, Any]:
    """The lags while ``SENDERS`` messages of ``size`` bytes are sent at once on a fresh app."""
    from agents import Agent, OpenAIResponsesModel
    from openai import AsyncOpenAI

    from agents_state_ext.server import create_app
    from agents_state_ext.stores import SQLiteStore

    sys.path.insert(0, str(ROOT / "tests"))
    from _asgi_client import ASGIClient  # the test suite's in-process ASGI client

    store = SQLiteStore(folder / f"round{number}.db")
    openai = AsyncOpenAI(api_key="sk-mock", base_url=mock_url, max_retries=0)
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=openai)
    limits = {} if limit is None else {"max_message_bytes": limit}
    app = create_app(store=store, agent=Agent(name="assistant", model=model), **limits)
    client = ASGIClient(app)
    ids = []
    for _ in range(SENDERS):
        status, created = await client.post("/api/conversations", {"system": "be brief"})
        assert status == 201, created
        ids.append(created["id"])
    text = message(size)

    async def send(cid: str) -> str:
        response = await client.open(
            "POST", f"/api/conversations/{cid}/messages", {"content": text}
        )
        if response.status != 200:
            return f"{response.status} {(await response.json())['error']['type']}"
        events = await response.all_events()
        return str(events[-1][1].get("status"))

    lags: list[float] = []
    stop = asyncio.Event()
    ticking = asyncio.ensure_future(_ticker(lags, stop))
    await asyncio.sleep(TICK * 4)
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(send(cid) for cid in ids))
    wall = time.perf_counter() - started
    stop.set()
    await ticking
    await app.state.chat_server.aclose()
    await store.aclose()
    await openai.close()
    lags.sort()
    return {
        "max_lag": lags[-1],
        "p99_lag": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
        "wall": wall,
        "outcomes": ",".join(sorted(set(outcomes))),  # type: ignore[dict-item]
    }


async def run(rounds: int, size: int, limit: int | None) -> list[dict[str, Any]]:
    """Every round's figures (a fresh app and store each round, one mock server)."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    command = [sys.executable, "-m", "agents_state_ext.testing", "serve-mock"]
    responder = ["--responder", "bench.bench_server_loop:short_reply"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    mock = subprocess.Popen([*command, *responder], stdout=subprocess.PIPE, text=True, env=env)
    results = []
    try:
        assert mock.stdout is not None
        url = mock.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as folder:
            await one_round(1000, Path(folder), -1, url, limit)  # loads the token encoding
            for number in range(rounds):
                results.append(await one_round(size, Path(folder), number, url, limit))
    finally:
        mock.terminate()
        mock.wait(30)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_server_loop", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=900_000, help="bytes per message")
    parser.add_argument(
        "--max-message-bytes", type=int, help="the app's limit (default: create_app's)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    results = asyncio.run(run(args.rounds, args.size, args.max_message_bytes))
    limit = args.max_message_bytes or "default"
    print(f"{SENDERS} concurrent messages of {args.size:,} bytes, {args.rounds} rounds")
    print(f"max_message_bytes: {limit}")
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for number, result in enumerate(results):
        print(
            f"  round {number}: max lag {result['max_lag'] * 1000:7.1f} ms, "
            f"p99 {result['p99_lag'] * 1000:7.1f} ms, sends {result['wall']:.2f} s "
            f"({result['outcomes']})"
        )
    for key in ("max_lag", "p99_lag"):
        value = statistics.median(r[key] for r in results)
        print(f"median {key.replace('_', ' ')}: {value * 1000:.1f} ms")
    print(f"median wall time of the sends: {statistics.median(r['wall'] for r in results):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
