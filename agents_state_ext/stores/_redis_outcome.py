"""What became of a RedisStore write whose connection broke: applied (with its answer) or not.

The Redis side of :mod:`agents_state_ext.stores._postgres_outcome`'s contract. Every writing
script is wrapped by :func:`recorded`: the client names the write with a fresh commit id before
sending it, and the script notes its answer under that id (in an ``outcomes`` hash beside the
keys it writes, with the time in an ``outcome-times`` sorted set; both expire ``TTL_MS`` after
the last write, and notes older than that are pruned) in the same atomic run as the write. A
script whose id is already noted answers the note and writes nothing.

When the connection breaks (or times out) after the script may have been sent, :func:`lookup`
asks on a fresh connection, for up to ``_WAIT`` seconds (a restart takes a moment):

- ``"applied"``: the note is there; the write returns its answer, as stored;
- ``"not applied"``: there was no note, and the lookup left one (``void``) in the same step,
  so a copy of the script that reaches the server later writes nothing: the write may be sent
  again (under a new id), or reported failed;
- ``"unknown"``: the server did not answer in time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Literal

from redis.exceptions import RedisError

__all__ = ["LOOKUP", "TTL_MS", "Outcome", "lookup", "recorded"]

Outcome = Literal["applied", "not applied", "unknown"]

TTL_MS = 120_000
"""How long a write's note is kept: well past the lookup's wait and any socket timeout."""

_PAUSE = 0.05
_WAIT = 10.0  # seconds to wait for the server to answer

# note(outcomes, times, id, ttl, answer): keep ``answer`` under ``id``, prune the expired notes.
_NOTE = """local function note(outcomes, times, id, ttl, answer)
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  for _, old in ipairs(redis.call('ZRANGEBYSCORE', times, '-inf', ms - ttl)) do
    redis.call('HDEL', outcomes, old)
  end
  redis.call('ZREMRANGEBYSCORE', times, '-inf', ms - ttl)
  redis.call('HSET', outcomes, id, cjson.encode(answer))
  redis.call('ZADD', times, ms, id)
  redis.call('PEXPIRE', outcomes, ttl)
  redis.call('PEXPIRE', times, ttl)
end
"""

LOOKUP = f"""#!lua
-- KEYS: outcomes, outcome-times. ARGV: commit id, ttl (ms).
-- Answers the write's note, or nil after leaving the note 'void' (it can no longer apply).
{_NOTE}
local known = redis.call('HGET', KEYS[1], ARGV[1])
if known then return known end
note(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), {{'void'}})
return false
"""


def recorded(script: str) -> str:
    """``script`` (its ``#!lua`` line first) taking two more KEYS and two more ARGV.

    The last two KEYS are the outcomes hash and its times; the last two ARGV the commit id and
    the notes' time to live in ms. The script body sees KEYS and ARGV without them.
    """
    first, _, body = script.partition("\n")
    if not first.startswith("#!lua"):
        raise ValueError("a recorded script starts with its #!lua line")
    return f"""{first}
{_NOTE}
local outcomes, times = KEYS[#KEYS - 1], KEYS[#KEYS]
local id, ttl = ARGV[#ARGV - 1], tonumber(ARGV[#ARGV])
local known = redis.call('HGET', outcomes, id)
if known then return cjson.decode(known) end
local keys, args = {{}}, {{}}
for i = 1, #KEYS - 2 do keys[i] = KEYS[i] end
for i = 1, #ARGV - 2 do args[i] = ARGV[i] end
local answer = (function(KEYS, ARGV)
{body}
end)(keys, args)
note(outcomes, times, id, ttl, answer)
return answer
"""


async def lookup(script: Any, where: Sequence[str], commit_id: str) -> tuple[Outcome, list[Any]]:
    """What became of the write ``commit_id`` noted at ``where`` (outcomes, times) and its answer.

    ``script`` is :data:`LOOKUP`, registered on the store's client. Bounded at about
    ``_WAIT`` seconds (a blackholed server answers nothing): then ``unknown``.
    """
    try:
        return await asyncio.wait_for(_lookup(script, where, commit_id), _WAIT + 1.0)
    except TimeoutError:
        return "unknown", []


async def _lookup(script: Any, where: Sequence[str], commit_id: str) -> tuple[Outcome, list[Any]]:
    loop = asyncio.get_running_loop()
    until = loop.time() + _WAIT
    while loop.time() < until:
        try:
            known = await script(keys=list(where), args=[commit_id, TTL_MS])
        except (RedisError, OSError, asyncio.TimeoutError):  # not back yet
            await asyncio.sleep(_PAUSE)
            continue
        if known is None:
            return "not applied", []
        answer = json.loads(known)
        if answer == ["void"]:  # a lookup before ours, whose answer was lost, voided it
            return "not applied", []
        return "applied", list(answer)
    return "unknown", []
