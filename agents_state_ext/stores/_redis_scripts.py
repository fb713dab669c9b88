"""The Lua scripts of RedisStore.

The keys they work on, and how their answers are read, are in
:mod:`agents_state_ext.stores._redis_keys`. Each script names its ``KEYS`` and ``ARGV`` in its
first lines.
"""

from __future__ import annotations

__all__ = [
    "ACTIVE_PATH",
    "COMMIT",
    "CREATE",
    "DELETE",
    "HASH_DELETE",
    "HASH_SET",
    "PUT_ATTEMPT",
    "PUT_LEDGER",
    "SET_META",
]

# Every script answers a table whose first element says how it went: "ok" (then the results),
# or the reason nothing was written, turned into the library's error by ``outcome``.

CREATE = """#!lua
-- KEYS: info, index, seq. ARGV: id, strategy, meta, created_at.
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'strategy', ARGV[2], 'meta', ARGV[3], 'created_at', ARGV[4])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
return {'ok'}
"""

COMMIT = """#!lua
-- KEYS: info, nodes, parents, node-order, attempts, attempt-order, the fence's ledger.
-- ARGV: expected head, new head ('' for none), '1' if the new head is among the nodes written,
-- the node count n, the fence's token (0: no fence; the 7th key is then unused),
-- n times (id, parent id or '', JSON), then pairs (attempt id, JSON).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
if ARGV[5] ~= '0' then
  local version = redis.call('HGET', KEYS[7], 'version') or ''
  if tonumber(version) ~= tonumber(ARGV[5]) then return {'fenced', version} end
end
local head = redis.call('HGET', KEYS[1], 'head') or ''
if head ~= ARGV[1] then return {'conflict', head} end
local new_head = ARGV[2]
if new_head ~= '' and ARGV[3] == '0' and redis.call('HEXISTS', KEYS[2], new_head) == 0 then
  return {'no-node', new_head}
end
-- Every parent is written by this commit or already stored: no node is stored as an orphan.
local ids = {}
for j = 6, 5 + 3 * tonumber(ARGV[4]), 3 do ids[ARGV[j]] = true end
for j = 6, 5 + 3 * tonumber(ARGV[4]), 3 do
  local parent = ARGV[j + 1]
  if parent ~= '' and not ids[parent] and redis.call('HEXISTS', KEYS[2], parent) == 0 then
    return {'no-parent', ARGV[j], parent}
  end
end
local i = 6
for _ = 1, tonumber(ARGV[4]) do
  if redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2]) == 1 then
    redis.call('RPUSH', KEYS[4], ARGV[i])
  end
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 3
end
while i < #ARGV do
  if redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('RPUSH', KEYS[6], ARGV[i])
  end
  i = i + 2
end
if new_head == '' then
  redis.call('HDEL', KEYS[1], 'head')
else
  redis.call('HSET', KEYS[1], 'head', new_head)
end
return {'ok'}
"""

# The walk is bounded by the node count: a longer chain must repeat a node, a cycle.
ACTIVE_PATH = """#!lua flags=no-writes
-- KEYS: info, nodes, parents. ARGV: leaf ('' for the head), limit (0 for none).
-- Answers the node JSONs from the leaf up.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
local id = ARGV[1]
if id == '' then
  id = redis.call('HGET', KEYS[1], 'head')
  if not id then return {'ok'} end
end
if redis.call('HEXISTS', KEYS[2], id) == 0 then return {'no-node', id} end
local limit = tonumber(ARGV[2])
local bound = redis.call('HLEN', KEYS[3])
local out = {'ok'}
local steps = 0
while id ~= '' and (limit == 0 or steps < limit) do
  local data = redis.call('HGET', KEYS[2], id)
  local parent = redis.call('HGET', KEYS[3], id)
  if steps >= bound or not data or not parent then return {'broken', id} end
  steps = steps + 1
  out[steps + 1] = data
  id = parent
end
return out
"""

PUT_ATTEMPT = """#!lua
-- KEYS: info, attempts, attempt-order. ARGV: attempt id, JSON.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
if redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
return {'ok'}
"""

SET_META = """#!lua
-- KEYS: info. ARGV: the meta read, the merged meta. Writes only if nobody changed it since.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
if redis.call('HGET', KEYS[1], 'meta') ~= ARGV[1] then return {'changed'} end
redis.call('HSET', KEYS[1], 'meta', ARGV[2])
return {'ok'}
"""

HASH_SET = """#!lua
-- KEYS: info, a hash of the conversation, and optionally a set. ARGV: the set member
-- (or ''), then field/value pairs (one HSET each: unpack() of a long list overflows Lua's stack).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
for i = 2, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
if KEYS[3] and #ARGV > 1 then redis.call('SADD', KEYS[3], ARGV[1]) end
return {'ok'}
"""

HASH_DELETE = """#!lua
-- KEYS: info, a hash of the conversation. ARGV: the field.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
redis.call('HDEL', KEYS[2], ARGV[1])
return {'ok'}
"""

DELETE = """#!lua
-- KEYS: info, nodes, parents, node-order, attempts, attempt-order, runs, encodings, ledger,
-- outcomes, outcome-times, index. ARGV: id, the prefix of its token-count keys.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-conversation'} end
for _, encoding in ipairs(redis.call('SMEMBERS', KEYS[8])) do
  redis.call('DEL', ARGV[2] .. encoding)
end
redis.call('DEL', unpack(KEYS, 1, 11))
redis.call('ZREM', KEYS[12], ARGV[1])
return {'ok'}
"""

PUT_LEDGER = """#!lua
-- KEYS: ledger. ARGV: expected version, blob, holder ('' for none), held_until ('' for none).
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return {'conflict', version} end
redis.call('HSET', KEYS[1], 'blob', ARGV[2], 'version', version + 1)
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], 'holder')
else redis.call('HSET', KEYS[1], 'holder', ARGV[3]) end
if ARGV[4] == '' then redis.call('HDEL', KEYS[1], 'held_until')
else redis.call('HSET', KEYS[1], 'held_until', ARGV[4]) end
return {'ok', version + 1}
"""
