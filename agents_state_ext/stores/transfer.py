"""Export a stored conversation to one JSON document, and import it into any backend.

The document is a versioned envelope (``format`` and ``version``); an importer refuses what it
does not know. Version history:

- 1: the conversation (strategy, meta, created_at), its nodes in first-write order, the head,
  the attempt records in start order, paused runs, token counts per encoding, the ledger.

Moving an app from SQLite to PostgreSQL::

    document = await export_conversation(sqlite_store, "chat_1")
    await import_conversation(postgres_store, document)
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from .._tokens import ENCODING_HASHES
from ..errors import (
    ConversationNotFoundError,
    GraphError,
    RecordError,
    StateBlobError,
    StoreError,
)
from . import _codec
from .base import ConversationStore, LedgerStore, TokenCountStore

__all__ = ["DOCUMENT_FORMAT", "DOCUMENT_VERSION", "export_conversation", "import_conversation"]

DOCUMENT_FORMAT = "agents-state-ext/conversation"
DOCUMENT_VERSION = 1


async def export_conversation(
    store: ConversationStore,
    conversation_id: str,
    *,
    encodings: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The whole of a stored conversation as one JSON-ready document.

    Token counts are exported for ``encodings`` (default: the tiktoken encodings the library
    counts with) when the store keeps them; they are a cache, so a missing one only costs a
    recount. The ledger is exported without its version or holder: an import starts it afresh.
    The reads are not one transaction: export a conversation nobody is writing to.
    """
    info = await store.get_conversation(conversation_id)
    graph = await store.load_graph(conversation_id)
    attempts = await store.list_attempts(conversation_id)
    run_states: dict[str, str] = {}
    for record in attempts:
        blob = await store.get_run_state(conversation_id, record.attempt_id)
        if blob is not None:
            run_states[record.attempt_id] = blob
    document: dict[str, Any] = {
        "format": DOCUMENT_FORMAT,
        "version": DOCUMENT_VERSION,
        "conversation": {
            "id": info.id,
            "strategy": info.strategy,
            "meta": info.meta,
            "created_at": info.created_at,
        },
        "head": graph.active_leaf,
        "nodes": [node.to_dict() for node in graph.nodes()],
        "attempts": [record.to_dict() for record in attempts],
        "run_states": run_states,
        "token_counts": {},
        "ledger": None,
    }
    if isinstance(store, TokenCountStore):
        for encoding in ENCODING_HASHES if encodings is None else encodings:
            counts = await store.get_token_counts(conversation_id, encoding)
            if counts:
                document["token_counts"][encoding] = counts
    if isinstance(store, LedgerStore):
        ledger = await store.get_ledger(conversation_id)
        if ledger is not None:
            document["ledger"] = {"blob": ledger.blob}
    return document


async def import_conversation(
    store: ConversationStore,
    document: Mapping[str, Any],
    *,
    conversation_id: str | None = None,
) -> str:
    """Write an exported conversation into ``store``; its id (``conversation_id`` renames it).

    The whole document is checked before anything is written: a bad one is
    ``StateBlobError`` naming the field. An id already taken (by a conversation, or by a ledger
    kept under it) is ``StoreError``. If a write fails once the conversation exists, it is
    deleted again, so nothing is left half-imported. Token counts are skipped by a store
    without the capability; a ledger is refused by a store that cannot keep it.
    """
    checked = _check_document(document)
    target = checked.id if conversation_id is None else conversation_id
    _codec.check_id(target, "conversation id")
    if checked.ledger is not None and not isinstance(store, LedgerStore):
        raise StoreError(f"conversation {checked.id!r} has a ledger and this store cannot keep one")
    await _refuse_taken(store, target)
    await store.create_conversation(target, strategy=checked.strategy, meta=checked.meta)
    try:
        await _write(store, target, checked)
    except BaseException:
        # Best effort: the original failure is what the caller must see.
        with contextlib.suppress(Exception):
            await store.delete_conversation(target)
        raise
    return target


async def _refuse_taken(store: ConversationStore, conversation_id: str) -> None:
    try:
        await store.get_conversation(conversation_id)
    except ConversationNotFoundError:
        pass
    else:
        raise StoreError(
            f"conversation {conversation_id!r} already exists; import it under another id"
        )
    if isinstance(store, LedgerStore) and await store.get_ledger(conversation_id) is not None:
        raise StoreError(
            f"a ledger is already kept under {conversation_id!r}; import it under another id"
        )


async def _write(store: ConversationStore, conversation_id: str, checked: _Checked) -> None:
    if checked.nodes or checked.attempts:
        await store.commit(
            conversation_id,
            checked.nodes,
            expected_head=None,
            new_head=checked.head,
            attempts=checked.attempts,
        )
    for attempt_id, blob in checked.run_states.items():
        await store.put_run_state(conversation_id, attempt_id, blob)
    if isinstance(store, TokenCountStore):
        for encoding, counts in checked.token_counts.items():
            await store.put_token_counts(conversation_id, encoding, counts)
    if checked.ledger is not None:
        assert isinstance(store, LedgerStore)  # checked before anything was written
        await store.put_ledger(
            conversation_id, checked.ledger, expected_version=0, holder=None, held_until=None
        )


# -- validation --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Checked:
    """A validated document, decoded into what the store methods take."""

    id: str
    strategy: str
    meta: dict[str, Any]
    head: str | None
    nodes: list[Node]
    attempts: list[AttemptRecord]
    run_states: dict[str, str]
    token_counts: dict[str, dict[str, int]]
    ledger: str | None


def _bad(field: str, problem: str) -> StateBlobError:
    return StateBlobError(f"conversation document: {field}: {problem}")


def _typed(value: Any, kind: type | tuple[type, ...], field: str, what: str) -> Any:
    # bool is an int to isinstance, never a number or text in a document
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _bad(field, f"expected {what}, got {type(value).__name__}")
    return value


def _text(value: Any, field: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    _typed(value, str, field, "text")
    try:
        return _codec.check_id(value, "value")
    except StoreError:
        raise _bad(field, f"expected non-empty Unicode text without NUL, got {value!r}") from None


def _number(value: Any, field: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    _typed(value, (int, float), field, "a number")
    if not math.isfinite(value):
        raise _bad(field, f"expected a finite number, got {value!r}")
    return value


def _json_object(value: Any, field: str) -> dict[str, Any]:
    _typed(value, dict, field, "an object")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _bad(field, f"not JSON: {exc}") from None
    return dict(value)


def _check_document(document: Any) -> _Checked:
    _typed(document, Mapping, "document", "an object")
    if document.get("format") != DOCUMENT_FORMAT:
        raise _bad("format", f"expected {DOCUMENT_FORMAT!r}, got {document.get('format')!r}")
    if document.get("version") != DOCUMENT_VERSION:
        raise _bad(
            "version",
            f"unsupported version {document.get('version')!r} (known: {DOCUMENT_VERSION})",
        )
    conversation = _typed(document.get("conversation"), dict, "conversation", "an object")
    conversation_id = _text(conversation.get("id"), "conversation.id")
    strategy = _text(conversation.get("strategy"), "conversation.strategy")
    meta = _json_object(conversation.get("meta", {}), "conversation.meta")
    _number(conversation.get("created_at", 0.0), "conversation.created_at")
    nodes = _check_nodes(document.get("nodes"))
    head = _text(document.get("head"), "head", optional=True)
    try:
        ConversationGraph.from_nodes(nodes, conversation_id=conversation_id, active_leaf=head)
    except (GraphError, KeyError) as exc:
        field = "head" if head is not None and head not in {n.id for n in nodes} else "nodes"
        raise _bad(field, f"not a tree with that head: {exc}") from None
    attempts = _check_attempts(document.get("attempts"))
    known = {record.attempt_id for record in attempts}
    run_states: dict[str, str] = {}
    for attempt_id, blob in _typed(
        document.get("run_states", {}), dict, "run_states", "an object"
    ).items():
        field = f"run_states[{attempt_id!r}]"
        if attempt_id not in known:
            raise _bad(field, "no attempt record has this id")
        run_states[attempt_id] = _typed(blob, str, field, "text")
    node_ids = {node.id for node in nodes}
    return _Checked(
        id=conversation_id,
        strategy=strategy,
        meta=meta,
        head=head,
        nodes=nodes,
        attempts=attempts,
        run_states=run_states,
        token_counts=_check_counts(document.get("token_counts", {}), node_ids),
        ledger=_check_ledger(document.get("ledger")),
    )


def _check_nodes(raw: Any) -> list[Node]:
    nodes: list[Node] = []
    for index, data in enumerate(_typed(raw, list, "nodes", "a list")):
        field = f"nodes[{index}]"
        _typed(data, dict, field, "an object")
        _text(data.get("id"), f"{field}.id")
        _text(data.get("parent_id"), f"{field}.parent_id", optional=True)
        _text(data.get("attempt_id"), f"{field}.attempt_id", optional=True)
        _text(data.get("request_id"), f"{field}.request_id", optional=True)
        _typed(data.get("role"), str, f"{field}.role", "text")
        _typed(data.get("status"), str, f"{field}.status", "text")
        for position, item in enumerate(
            _typed(data.get("items", []), list, f"{field}.items", "a list")
        ):
            _json_object(item, f"{field}.items[{position}]")
        _json_object(data.get("meta", {}), f"{field}.meta")
        _number(data.get("created_at", 0.0), f"{field}.created_at")
        nodes.append(Node.from_dict(data))
    return nodes


def _check_attempts(raw: Any) -> list[AttemptRecord]:
    records: list[AttemptRecord] = []
    seen: set[str] = set()
    for index, data in enumerate(
        _typed(raw if raw is not None else [], list, "attempts", "a list")
    ):
        field = f"attempts[{index}]"
        _json_object(data, field)
        attempt_id = _text(data.get("attempt_id"), f"{field}.attempt_id")
        _text(data.get("message_id"), f"{field}.message_id")
        _text(data.get("response_id"), f"{field}.response_id", optional=True)
        _typed(data.get("status", "queued"), str, f"{field}.status", "text")
        _number(data.get("started_at"), f"{field}.started_at", optional=True)
        if attempt_id in seen:
            raise _bad(f"{field}.attempt_id", f"{attempt_id!r} appears twice")
        seen.add(attempt_id)
        try:
            records.append(AttemptRecord.from_dict(data))
        except (TypeError, RecordError) as exc:
            raise _bad(field, str(exc)) from None
    return records


def _check_counts(raw: Any, node_ids: set[str]) -> dict[str, dict[str, int]]:
    checked: dict[str, dict[str, int]] = {}
    for encoding, counts in _typed(raw, dict, "token_counts", "an object").items():
        field = f"token_counts[{encoding!r}]"
        _typed(counts, dict, field, "an object")
        try:
            checked[encoding] = _codec.check_counts(encoding, counts)
        except StoreError as exc:
            raise _bad(field, str(exc)) from None
        unknown = sorted(set(counts) - node_ids)
        if unknown:
            raise _bad(field, f"counts for nodes not in the document: {', '.join(unknown)}")
    return checked


def _check_ledger(raw: Any) -> str | None:
    if raw is None:
        return None
    _typed(raw, dict, "ledger", "an object")
    blob: str = _typed(raw.get("blob"), str, "ledger.blob", "text")
    return blob
