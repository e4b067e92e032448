-- renew: extends the lease of a live hold, so a call that runs longer than its lease is not
-- expired (and billed at its worst case) while its edge is still streaming it. The edge renews
-- a call once half its lease has passed. Changes nothing else; no event (the hold is the same).
--
-- KEYS[1]  unused (the org's outbox, for a uniform key layout)
-- KEYS[2]  the reservation hash
-- KEYS[3]  the org's lease index: the root level's in-flight set, among the record's levels'
-- KEYS[n]  the other levels' in-flight sets (the tenant's chain: renew.ts); a record on other
--          levels (its team moved) returns {'keys', ...} with theirs, changing nothing
-- ARGV[1]  spec (JSON): kp, org, tenant, resId, keepMs; `now` only under a test clock
--
-- Returns {status ('renewed' | 'closed' | 'unknown'), expiresAt}, or {'keys', key...}

local spec = cjson.decode(ARGV[1])
spec.now = clockNow(spec)
local v = redis.call('HMGET', KEYS[2], 'state', 'expiresAt', 'r')
local x = v[1] and recordFixed(KEYS[2], v[3]) or {}
local f = {v[1], x[1], x[15], x[16], v[2]}
if not f[1] or f[2] ~= spec.tenant then
  return {'unknown', '0'}
end
if f[1] ~= 'held' then
  return {'closed', f[5] or '0'}
end
-- The record's levels' in-flight sets: declared (lib.lua undeclared), or asked for first.
local holds = {}
for i, level in ipairs(recordLevels(f[4])) do
  holds[i] = tenantKey(spec, level, ':holds')
end
local missing = undeclared(holds)
if missing then
  return {'keys', unpack(missing)}
end
local expiresAt = spec.now + tonumber(f[3])
for _, key in ipairs(holds) do
  redis.call('ZADD', key, 'XX', I(expiresAt), spec.resId)
end
redis.call('HSET', KEYS[2], 'expiresAt', I(expiresAt))
redis.call('PEXPIRE', KEYS[2], tonumber(f[3]) + spec.keepMs)
return {'renewed', I(expiresAt)}
