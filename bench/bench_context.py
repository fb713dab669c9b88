"""How long select_context takes on long synthetic paths, cold and warm, with real counts.

Run ``python -m bench.bench_context``. Cold: empty count cache and a new ContextIndex, so every
message is encoded. Warm: the same path again with the same index. Next turn: the path grows
by a reply and a new prompt (alternating between two such paths), the steady state of a chat.
No index: counts cached, but the turn structure is rebuilt from the whole path.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from agents_state_ext.context import ContextIndex, select_context
from agents_state_ext.nodes import Node, NodeStatus
from agents_state_ext.tokens import TokenCounter

BUDGET = 8_000
SIZES = (10_000, 50_000)

SENTENCES = (
    "Could you summarise the last quarterly report in three bullet points?",
    "The deployment failed because the migration locked the orders table for too long.",
    "Je voudrais réserver une table pour quatre personnes demain soir, vers vingt heures.",
    "Die Lieferung verzögert sich leider um zwei Wochen wegen fehlender Bauteile.",
    "¿Puedes explicarme la diferencia entre una lista y una tupla en Python?",
    "请帮我把这段文字翻译成英文，并保持原来的语气。",  # noqa: RUF001 - real Chinese punctuation
    "東京の天気予報によると、明日は午後から雨が降るそうです。",
    "Пожалуйста, проверь этот код на ошибки и предложи улучшения.",
    "هل يمكنك مساعدتي في كتابة رسالة اعتذار للعميل؟",
    "कृपया इस लेख का सारांश दो वाक्यों में लिखिए।",
    "다음 주 회의 일정을 정리해서 팀에 공유해 주세요.",
    "def retry(fn, attempts=3):\n    for i in range(attempts):\n        return fn()",
    "Great, thanks! 🎉 That fixed it — the tests are green again ✅",
)


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 4)))


def make_path(messages: int, seed: int = 7) -> list[Node]:
    """A root→leaf path of about ``messages`` nodes ending with an active user message."""
    rng = random.Random(seed)
    path = [
        Node(
            "sys",
            None,
            "system",
            "complete",
            [{"role": "system", "content": "You are a helpful assistant."}],
        )
    ]
    turn = 0
    while len(path) < messages - 1:
        turn += 1
        user = Node(
            f"u{turn}",
            path[-1].id,
            "user",
            "complete",
            [{"type": "message", "role": "user", "content": _text(rng)}],
        )
        items: list[dict[str, object]] = []
        if turn % 4 == 0:
            call_id = f"call_{turn}"
            items += [
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "search_orders",
                    "arguments": f'{{"query": "order {turn}", "limit": 5}}',
                },
                {"type": "function_call_output", "call_id": call_id, "output": _text(rng)},
            ]
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": _text(rng)}],
            }
        )
        status: NodeStatus = "cancelled" if rng.random() < 0.03 else "complete"
        path += [user, Node(f"a{turn}", user.id, "assistant", status, items)]
    path.append(
        Node(
            "active",
            path[-1].id,
            "user",
            "complete",
            [{"role": "user", "content": _text(rng)}],
        )
    )
    return path


def _median_ns(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        run()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times)


def bench(messages: int, counter: TokenCounter) -> dict[str, float]:
    path = make_path(messages)
    # Two consecutive requests: the second has one more reply and a new active prompt.
    reply = Node(
        "a_next", path[-1].id, "assistant", "complete", [{"role": "assistant", "content": "ok"}]
    )
    nxt = [
        *path,
        reply,
        Node("u_next", reply.id, "user", "complete", [{"role": "user", "content": "and?"}]),
    ]

    def cold() -> object:
        counter.clear_cache()
        return select_context(path, budget=BUDGET, counter=counter, index=ContextIndex())

    index = ContextIndex()
    select_context(path, budget=BUDGET, counter=counter, index=index)
    select_context(nxt, budget=BUDGET, counter=counter, index=index)
    flip = [path, nxt]

    def next_turn() -> object:
        flip.reverse()
        return select_context(flip[0], budget=BUDGET, counter=counter, index=index)

    results = {"cold_ms": _median_ns(cold, 3) / 1e6}
    select_context(path, budget=BUDGET, counter=counter, index=index)
    results["warm_us"] = (
        _median_ns(lambda: select_context(path, budget=BUDGET, counter=counter, index=index), 2000)
        / 1e3
    )
    results["next_turn_us"] = _median_ns(next_turn, 2000) / 1e3
    results["no_index_ms"] = (
        _median_ns(lambda: select_context(path, budget=BUDGET, counter=counter), 20) / 1e6
    )
    selection = select_context(path, budget=BUDGET, counter=counter, index=index)
    results["kept_turns"] = selection.turns
    results["used"] = selection.used
    return results


def main() -> None:
    counter = TokenCounter("gpt-4.1")
    print(f"select_context, budget {BUDGET}, encoding {counter.encoding_name}")
    header = ("messages", "cold ms", "warm µs", "next turn µs", "no index ms", "kept turns", "used")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (9, 9, 9, 13, 12, 11, 6), strict=True)))
    for size in SIZES:
        r = bench(size, counter)
        print(
            f"{size:>9,} {r['cold_ms']:>9.1f} {r['warm_us']:>9.1f} {r['next_turn_us']:>13.1f} "
            f"{r['no_index_ms']:>12.2f} {r['kept_turns']:>11.0f} {r['used']:>6.0f}"
        )


if __name__ == "__main__":
    main()
