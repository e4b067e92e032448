-- usage: the current state of a tenant's windows (slid to now), suspension, calls in flight
-- and lifetime billed totals. Changes nothing but the windows' sliding.
--
-- KEYS[1]  unused (the org's outbox, for a uniform key layout)
-- KEYS[2]  the tenant's state hash
-- KEYS[n]  the levels' state hashes and holds sorted sets, the budgets' window hashes of the
--          tenant's plan (indexes in the spec)
-- ARGV[1]  spec (JSON): now, bounds, levels, budgets
--
-- Returns {suspended, inFlight, billedTokens, billedMicroUsd, windows}

local spec = cjson.decode(ARGV[1])
local st = redis.call('HMGET', KEYS[2], 'suspended', 'billedT', 'billedU')
local inflight = redis.call('ZCARD', KEYS[spec.levels[1].holds])
return {st[1] or '0', I(inflight), st[2] or '0', st[3] or '0', windowStates(spec)}
