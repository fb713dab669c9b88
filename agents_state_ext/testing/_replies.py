"""Scripted model answers (:class:`Reply`) and what a responder sees (:class:`ResponseContext`)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from ._items import item_text
from ._reasoning import reasoning_template, summary_text

__all__ = ["Reply", "ResponseContext", "Usage", "split_words"]


def split_words(text: str, pieces: int = 3) -> tuple[str, ...]:
    """``text`` cut at word boundaries into at most ``pieces`` chunks that join back to it."""
    words = re.findall(r"\s*\S+\s*|\s+", text)
    if not words:
        return ()
    size = -(-len(words) // pieces)
    return tuple("".join(words[i : i + size]) for i in range(0, len(words), size))


@dataclass(frozen=True)
class Usage:
    """Token numbers reported in a response's ``usage``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        """The ``usage`` object of the Responses API [doc: openai ``ResponseUsage``].

        ``input_tokens_details`` holds ``cached_tokens`` and ``cache_write_tokens`` (both
        required by the installed openai's ``InputTokensDetails``).
        """
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {
                "cache_write_tokens": self.cache_write_tokens,
                "cached_tokens": self.cached_tokens,
            },
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        }


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _function_call(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None
) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call"}
    if call_id is not None:
        item["call_id"] = call_id
    item["name"] = name
    item["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    item["status"] = "completed"
    return item


@dataclass(frozen=True)
class Reply:
    """One scripted model answer: the output items of one response.

    Items are templates: the mock gives each a fresh id when it answers (``msg_N``, ``fc_N``) and
    each function call without ``call_id`` a ``call_N``. Combine replies with ``+``
    (``Reply.text("let me check") + Reply.tool_call("f", {})``). When streamed, ``delay``
    seconds pass between SSE frames; when not streamed, once before the answer.
    """

    output: tuple[dict[str, Any], ...]
    chunks: tuple[tuple[str, ...] | None, ...] = ()
    """Per output item: the text deltas of a message (None: split by words)."""
    delay: float = 0.0
    usage: Usage | None = None
    """None: small deterministic numbers derived from word counts."""
    status: Literal["completed", "incomplete"] = "completed"
    """``incomplete``: the response ends ``incomplete`` (reason ``max_output_tokens``)."""

    @classmethod
    def text(
        cls,
        text: str,
        *,
        chunks: Sequence[str] | None = None,
        delay: float = 0.0,
        usage: Usage | None = None,
        reasoning: str | None = None,
    ) -> Reply:
        """One assistant message; ``chunks`` are its streamed deltas and must join to ``text``.

        ``reasoning``: a reasoning item with this summary comes first (see :meth:`reasoning`).
        """
        if chunks is not None and "".join(chunks) != text:
            raise ValueError("chunks must join to the text")
        reply = cls(
            output=(_message(text),),
            chunks=(tuple(chunks) if chunks is not None else None,),
            delay=delay,
            usage=usage,
        )
        return reply._after_reasoning(reasoning)

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str | None = None,
        delay: float = 0.0,
        usage: Usage | None = None,
        reasoning: str | None = None,
    ) -> Reply:
        """One ``function_call`` item; a dict ``arguments`` is JSON-encoded.

        ``reasoning``: a reasoning item with this summary comes first.
        """
        reply = cls(output=(_function_call(name, arguments, call_id),), delay=delay, usage=usage)
        return reply._after_reasoning(reasoning)

    @classmethod
    def tool_calls(
        cls,
        calls: Sequence[tuple[str, Mapping[str, Any] | str]],
        *,
        delay: float = 0.0,
        usage: Usage | None = None,
        reasoning: str | None = None,
    ) -> Reply:
        """Parallel ``function_call`` items, one per ``(name, arguments)``.

        ``reasoning``: a reasoning item with this summary comes first.
        """
        reply = cls(
            output=tuple(_function_call(name, args, None) for name, args in calls),
            delay=delay,
            usage=usage,
        )
        return reply._after_reasoning(reasoning)

    @classmethod
    def reasoning(cls, summary: str = "Thinking.", *, encrypted: bool = True) -> Reply:
        """One reasoning item (``rs_N``) whose summary is ``summary``; combine it with ``+``.

        Its ``encrypted_content`` is sent only when the request's ``include`` asks for
        ``reasoning.encrypted_content`` [doc]; ``encrypted=False`` never sends it (as for a
        response whose reasoning cannot be replayed). Streamed, the summary is split by words
        into ``response.reasoning_summary_text.delta`` events.
        """
        return cls(output=(reasoning_template(summary, encrypted=encrypted),))

    @property
    def has_reasoning(self) -> bool:
        """True when one of the output items is a reasoning item."""
        return any(item.get("type") == "reasoning" for item in self.output)

    def _after_reasoning(self, summary: str | None) -> Reply:
        return self if summary is None else Reply.reasoning(summary) + self

    @classmethod
    def items(
        cls,
        items: Sequence[Mapping[str, Any]],
        *,
        delay: float = 0.0,
        usage: Usage | None = None,
    ) -> Reply:
        """Arbitrary raw output items, sent as given (ids and call ids added where missing)."""
        return cls(output=tuple(copy.deepcopy(dict(i)) for i in items), delay=delay, usage=usage)

    def __add__(self, other: Reply) -> Reply:
        """This reply's items followed by ``other``'s; the larger delay; ``other``'s usage wins."""
        if not isinstance(other, Reply):
            return NotImplemented
        return Reply(
            output=self.output + other.output,
            chunks=self._padded_chunks() + other._padded_chunks(),
            delay=max(self.delay, other.delay),
            usage=other.usage if other.usage is not None else self.usage,
            status=other.status,
        )

    def to_dict(self) -> dict[str, Any]:
        """This reply as JSON-ready data, e.g. for ``MockServer``; :meth:`from_dict` reads it."""
        return {
            "output": copy.deepcopy(list(self.output)),
            "chunks": [list(c) if c is not None else None for c in self.chunks],
            "delay": self.delay,
            "usage": asdict(self.usage) if self.usage is not None else None,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reply:
        """The reply that :meth:`to_dict` wrote; ``ValueError`` on an unknown ``status``."""
        status = data.get("status", "completed")
        if status not in ("completed", "incomplete"):
            raise ValueError(f"unknown reply status {status!r}")
        usage = data.get("usage")
        return cls(
            output=tuple(copy.deepcopy(dict(item)) for item in data["output"]),
            chunks=tuple(tuple(c) if c is not None else None for c in data.get("chunks") or ()),
            delay=float(data.get("delay", 0.0)),
            usage=Usage(**usage) if usage is not None else None,
            status="incomplete" if status == "incomplete" else "completed",
        )

    def as_incomplete(self) -> Reply:
        """This reply, ending as an ``incomplete`` response (streamed: ``response.incomplete``)."""
        return replace(self, status="incomplete")

    def _padded_chunks(self) -> tuple[tuple[str, ...] | None, ...]:
        return tuple(
            self.chunks[i] if i < len(self.chunks) else None for i in range(len(self.output))
        )

    def deltas_for(self, index: int, item: Mapping[str, Any]) -> tuple[str, ...]:
        """The text deltas streamed for output item ``index`` (a message or reasoning summary)."""
        chunks = self._padded_chunks()[index]
        if chunks is not None:
            return chunks
        if item.get("type") == "reasoning":
            return split_words(summary_text(item))
        return split_words(item_text(item))


@dataclass(frozen=True)
class ResponseContext:
    """What a responder (``mock.responder``) sees of one ``POST /responses`` request."""

    request: Mapping[str, Any]
    """The parsed JSON body, as sent."""
    response_id: str
    model: str
    streamed: bool
    history: tuple[dict[str, Any], ...]
    """Server-side context before this request: the previous response's or conversation's items."""
    input: tuple[dict[str, Any], ...]
    """This request's input items in stored shape, with server ids."""
    previous_response_id: str | None = None
    conversation_id: str | None = None
    call_index: int = 0
    """0 for the first ``POST /responses`` the mock answers with a reply, then 1, 2, ..."""

    @property
    def items(self) -> tuple[dict[str, Any], ...]:
        """The whole context the model sees: history then input."""
        return self.history + self.input

    @property
    def last_user_text(self) -> str | None:
        """Text of the last user message in the input, else in the history, else None."""
        for source in (self.input, self.history):
            for item in reversed(source):
                if item.get("type") == "message" and item.get("role") == "user":
                    return item_text(item)
        return None
