"""RedisStore's two capabilities: the ledgers (fenced, versioned blobs) and token counts.

Each is an object over the store's :class:`~._redis_link.RedisLink` and the scripts it
registered; the key layout is in :mod:`._redis_keys`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import _codec
from ._redis_keys import Keys, outcome
from ._redis_link import RedisLink
from .ledger import LedgerRecord

__all__ = ["RedisLedgers", "RedisTokenCounts"]


class RedisLedgers:
    """The ledger capability: one hash per key, written only from the expected version."""

    def __init__(self, link: RedisLink, namespace: str, put_script: Any) -> None:
        self._link, self._ns, self._put = link, namespace, put_script

    def key(self, key: str) -> str:
        """The Redis key of ledger ``key`` (beside the conversation of the same id)."""
        return self._keys(key).ledger

    def _keys(self, key: str) -> Keys:
        return Keys(self._ns, _codec.check_id(key, "ledger key"))

    async def get(self, key: str) -> LedgerRecord | None:
        ledger = self.key(key)
        [(blob, version, holder, until)] = await self._link.read(
            lambda p: p.hmget(ledger, ["blob", "version", "holder", "held_until"])
        )
        if blob is None:
            return None
        return LedgerRecord(blob, int(version), holder, None if until is None else float(until))

    async def put(
        self,
        key: str,
        blob: str,
        *,
        expected_version: int,
        holder: str | None,
        held_until: float | None,
    ) -> int:
        keys = self._keys(key)
        _codec.check_blob(blob)
        expected = _codec.check_version(expected_version)
        holder, until = _codec.check_hold(holder, held_until)
        stored_until = "" if until is None else repr(until)
        result = await self._link.run(
            self._put,
            [keys.ledger],
            [expected, blob, holder or "", stored_until],
            noted=keys.noted,
        )
        if result[0] == "conflict":
            raise _codec.ledger_conflict(key, int(result[1]), expected)
        return int(result[1])

    async def delete(self, key: str) -> None:
        ledger = self.key(key)
        await self._link.read(lambda p: p.delete(ledger))


class RedisTokenCounts:
    """The token-count capability: one hash per conversation and encoding."""

    def __init__(self, link: RedisLink, hash_set_script: Any) -> None:
        self._link, self._hash_set = link, hash_set_script

    async def put(self, keys: Keys, encoding: str, counts: Mapping[str, int]) -> None:
        checked = _codec.check_counts(encoding, counts)
        args: list[str | int] = [encoding]
        for node_id, count in checked.items():
            args += [node_id, count]
        result = await self._link.run(
            self._hash_set,
            [keys.info, keys.tokens(encoding), keys.encodings],
            args,
            noted=keys.noted,
        )
        outcome(result, keys)

    async def get(
        self, keys: Keys, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        tokens = keys.tokens(_codec.check_id(encoding, "encoding"))
        if node_ids is None:
            [stored] = await self._link.conversation_read(keys, lambda p: p.hgetall(tokens))
            return {node_id: int(count) for node_id, count in stored.items()}
        wanted = [_codec.check_id(i, "node id") for i in node_ids]
        if not wanted:
            await self._link.conversation_read(keys)
            return {}
        [found] = await self._link.conversation_read(keys, lambda p: p.hmget(tokens, wanted))
        return {i: int(n) for i, n in zip(wanted, found, strict=True) if n is not None}
