"""One versioned envelope for a paused or interrupted run: the SDK's RunState plus our ledger.

Layout (JSON)::

    {"format": "agents-state-ext/run", "version": 1,
     "payload": {"strategy": ..., "tracker": {...} | null, "partial": {...} | null,
                 "run_state": <RunState.to_json()>},
     "signature": "<hex HMAC-SHA256 of the canonical payload>"}   # only when a key is given

A ledger kept between runs (``ConversationState.dumps_ledger``, what a store holds beside a
conversation) uses the same envelope with format ``"agents-state-ext/ledger"`` and a payload
without ``run_state``.

Changelog of ``version``:
    1: first version.

No API key or other secret is written: the SDK's tracing key is excluded, and nothing of the
OpenAI client is part of the state.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from .errors import StateBlobError

__all__ = [
    "ENVELOPE_FORMAT",
    "ENVELOPE_VERSION",
    "LEDGER_FORMAT",
    "open_envelope",
    "seal_envelope",
]

ENVELOPE_FORMAT = "agents-state-ext/run"
LEDGER_FORMAT = "agents-state-ext/ledger"
ENVELOPE_VERSION = 1


def _canonical(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def _key_bytes(key: bytes | str) -> bytes:
    if isinstance(key, str):
        key = key.encode()
    if not key:
        raise ValueError("an integrity key must not be empty")
    return key


def seal_envelope(
    payload: Mapping[str, Any],
    *,
    key: bytes | str | None = None,
    format: str = ENVELOPE_FORMAT,
) -> str:
    """Serialize ``payload`` into the envelope, signed with HMAC-SHA256 when ``key`` is given."""
    envelope: dict[str, Any] = {
        "format": format,
        "version": ENVELOPE_VERSION,
        "payload": payload,
    }
    if key is not None:
        digest = hmac.new(_key_bytes(key), _canonical(payload), hashlib.sha256).hexdigest()
        envelope["signature"] = digest
    return json.dumps(envelope, separators=(",", ":"), default=str)


def open_envelope(
    blob: str | bytes, *, key: bytes | str | None = None, format: str = ENVELOPE_FORMAT
) -> dict[str, Any]:
    """The payload of an envelope; anything malformed, unknown or tampered is ``StateBlobError``.

    With ``key`` the envelope must carry a valid signature; without one a signature is not
    checked (the blob is then trusted as the caller's own storage).
    """
    try:
        envelope = json.loads(blob)
    except (TypeError, ValueError, UnicodeDecodeError) as exc:
        raise StateBlobError(f"the state blob is not valid JSON (truncated?): {exc}") from exc
    except RecursionError as exc:
        raise StateBlobError("the state blob is nested too deeply to be a state") from exc
    if not isinstance(envelope, dict) or envelope.get("format") != format:
        raise StateBlobError(f"not an agents-state-ext state blob (format {format!r})")
    version = envelope.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StateBlobError(f"the state blob has an invalid version {version!r}")
    if version > ENVELOPE_VERSION:
        raise StateBlobError(
            f"the state blob has version {version}, newer than this library reads "
            f"({ENVELOPE_VERSION}); upgrade agents-state-ext to load it"
        )
    payload = envelope.get("payload")
    if not isinstance(payload, dict):
        raise StateBlobError("the state blob has no payload object")
    if key is not None:
        signature = envelope.get("signature")
        if not isinstance(signature, str):
            raise StateBlobError("the state blob is not signed, but an integrity key was given")
        try:
            canonical = _canonical(payload)
        except (RecursionError, ValueError) as exc:
            raise StateBlobError("the state blob's payload cannot be checked") from exc
        expected = hmac.new(_key_bytes(key), canonical, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature, expected):
            raise StateBlobError("the state blob's signature does not match: it was changed")
    required: tuple[tuple[str, type], ...] = (("strategy", str),)
    if format == ENVELOPE_FORMAT:
        required = (*required, ("run_state", dict))
    for name, kind in required:
        if not isinstance(payload.get(name), kind):
            raise StateBlobError(f"the state blob's payload lacks a valid {name!r}")
    return payload
