"""A predictable token counter for tests: no tokenizer, counts chosen by the test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._tokens import item_texts

__all__ = ["FixedTokenCounter"]


class FixedTokenCounter:
    """Stands in for :class:`~agents_state_ext.TokenCounter` with counts a test can predict.

    * ``FixedTokenCounter(10)``: every message costs 10 tokens, whatever its items.
    * ``FixedTokenCounter({"u1": 5, "a1": 7})``: a message costs the number given for its id;
      an id not listed costs ``default`` if given, else its word count.
    * ``FixedTokenCounter()``: a message costs its word count.

    A word count is ``len(text.split())`` summed over the texts
    :func:`~agents_state_ext._tokens.item_texts` extracts (the role of a message included),
    with no framing. ``count_items`` and ``count_text`` have no id to look up, so they return
    the fixed number if one was given, else the word count. ``calls`` lists the message ids
    passed to ``count``, in order, for asserting what was counted.
    """

    def __init__(
        self, tokens: int | Mapping[str, int] | None = None, *, default: int | None = None
    ) -> None:
        self._fixed = tokens if isinstance(tokens, int) else None
        self._by_id = dict(tokens) if isinstance(tokens, Mapping) else {}
        self._default = default
        self.calls: list[str] = []

    def count_text(self, text: str) -> int:
        """The fixed number, else the word count of ``text``."""
        return self._fixed if self._fixed is not None else len(text.split())

    def count_items(self, items: Sequence[Mapping[str, Any]]) -> int:
        """The fixed number, else the word count of ``items``."""
        if self._fixed is not None:
            return self._fixed
        return sum(len(t.split()) for item in items for t in item_texts(item)[1])

    def count(self, message_id: str, items: Sequence[Mapping[str, Any]]) -> int:
        """The count for one message, by the rule chosen at construction."""
        self.calls.append(message_id)
        if message_id in self._by_id:
            return self._by_id[message_id]
        if self._default is not None:
            return self._default
        return self.count_items(items)
