"""Reasoning items: which models reason, their opaque ``encrypted_content`` and its checks.

Sources: reasoning item shape and ``include: ["reasoning.encrypted_content"]`` [doc]
(openai-python ``types/responses/response_reasoning_item.py``, ``response_includable.py``);
the tamper error [obs] (openai/codex#8145, smallmain/vscode-unify-chat-provider#178:
"The encrypted content for item rs_... could not be verified. Reason: Encrypted content could
not be decrypted or parsed.", code ``invalid_encrypted_content``, param null); the family
prefixes are [inf] from the model list of the reasoning guide.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._items import ApiError

__all__ = [
    "ENCRYPTED_INCLUDE",
    "REASONING_FAMILIES",
    "decode_reasoning",
    "encode_reasoning",
    "is_reasoning_model",
    "reasoning_template",
    "summary_text",
]

REASONING_FAMILIES = ("gpt-5", "o1", "o3", "o4", "codex")
"""Model name prefixes the mock treats as reasoning models."""
ENCRYPTED_INCLUDE = "reasoning.encrypted_content"
ENCRYPTED_MARKER = "_mock_encrypted"
"""Template key (never sent): False keeps ``encrypted_content`` off this item."""
_PREFIX = "enc1."
_KEY = b"agents-state-ext mock reasoning key"


def is_reasoning_model(model: str) -> bool:
    """True for names of a reasoning family (``gpt-5*``, ``o1*``, ``o3*``, ``o4*``, ``codex*``)."""
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(REASONING_FAMILIES)


def reasoning_template(summary: str, *, encrypted: bool = True) -> dict[str, Any]:
    """A reasoning output item template with one ``summary_text`` part (no id yet)."""
    item: dict[str, Any] = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
    }
    if not encrypted:
        item[ENCRYPTED_MARKER] = False
    return item


def summary_text(item: Mapping[str, Any]) -> str:
    """The joined summary texts of a reasoning item."""
    parts = item.get("summary") or []
    return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))


def _digest(payload: bytes) -> str:
    return hashlib.sha256(_KEY + payload).hexdigest()[:16]


def encode_reasoning(item_id: str, summary: Sequence[Mapping[str, Any]]) -> str:
    """The opaque ``encrypted_content`` of a reasoning item: ``enc1.<base64url>.<digest>``."""
    payload = json.dumps({"id": item_id, "summary": list(summary)}, sort_keys=True).encode()
    body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    return f"{_PREFIX}{body}.{_digest(payload)}"


def _unverifiable(item_id: str | None) -> ApiError:
    what = f"for item {item_id}" if item_id else "of a reasoning item"
    return ApiError(
        400,
        f"The encrypted content {what} could not be verified. Reason: Encrypted content could "
        "not be decrypted or parsed.",
        code="invalid_encrypted_content",
    )


def decode_reasoning(content: Any, item_id: str | None = None) -> dict[str, Any]:
    """The ``{id, summary}`` sealed in ``content``; the API's 400 when it was not made here."""
    if not isinstance(content, str) or not content.startswith(_PREFIX):
        raise _unverifiable(item_id)
    body, _, digest = content[len(_PREFIX) :].rpartition(".")
    try:
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        data = json.loads(payload)
    except ValueError:
        raise _unverifiable(item_id) from None
    if _digest(payload) != digest or not isinstance(data, dict):
        raise _unverifiable(item_id)
    return data
