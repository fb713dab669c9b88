"""Exact, cached token counts of Responses input items, loaded without touching the network.

What an item is counted as (the framing rule) is :mod:`._tokens_texts`; how an encoding is
found and verified offline is :mod:`._tokens_encoding`. This module is the counter itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ._tokens_encoding import ENCODING_HASHES, ESTIMATE_ENCODING, encoding_for_model, load_encoding
from ._tokens_texts import TOKENS_PER_MESSAGE, TOKENS_PER_NAME, item_texts, read_texts
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


# Texts this short (roles, tool names) have their counts memoized, up to _SHORT_MAX of them.
_SHORT = 24
_SHORT_MAX = 4096


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
        return self._encode(read_texts((items,)))[0]

    def count(self, message_id: str, items: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of one message's items, encoded once per (id, content, encoding)."""
        # The one-message case of count_many, read directly: a build counts its required
        # messages this way every time.
        known = self._trusted.get(message_id) if self._trusted else None
        if known is None:
            fingerprint = read_texts((items,))[0]
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
        texts = read_texts(item_lists)
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
