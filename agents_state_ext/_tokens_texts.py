"""What a Responses input item is counted as: its framing tokens and the texts to encode.

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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["TOKENS_PER_MESSAGE", "TOKENS_PER_NAME", "ItemTexts", "item_texts", "read_texts"]

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1

ItemTexts = tuple[int, tuple[str, ...]]


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


def read_texts(messages: Iterable[Sequence[Mapping[str, Any]]]) -> list[list[Any]]:
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
