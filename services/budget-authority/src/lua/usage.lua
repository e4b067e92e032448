-- usage: the current state of a tenant's windows (slid to now), suspension, calls in flight
-- and lifetime billed totals. Changes nothing but the windows' sliding.
--
-- KEYS[1]  unused (the org's outbox, for a uniform key layout)
-- KEYS[2]  the tenant's state hash
-- KEYS[n]  the levels' state hashes and holds sorted sets, the budgets' window hashes of the
--          tenant's plan (indexes in the spec), and the tenant's end-user registry (its index
--          `users` in the spec, when the tenant has end-user budgets)
-- ARGV[1]  spec (JSON): levels, budgets, users, since (ms, text: the end users seen since
--          then are tracked); `now` only under a test clock
--
-- Returns {suspended, inFlight, billedTokens, billedMicroUsd, windows, suspension owners,
--          overruns: count, tokens, micro-USD, last time (ms), end users tracked ('0' without
--          `users`)}. The caller read the registry before, to know whose windows to read: when
--          the count read here differs, a close or an admission changed it between the two
--          reads, and it reads again (usage.ts), so the reply is of one instant.

local spec = cjson.decode(ARGV[1])
spec.now = clockNow(spec)
local st = redis.call('HMGET', KEYS[2], 'suspended', 'billedT', 'billedU', 'so:alerter',
  'so:admin', 'suspendedBy', 'overN', 'overT', 'overU', 'overAt')
local inflight = redis.call('ZCARD', KEYS[spec.levels[1].holds])
local owners = {}
if st[4] == '1' then
  owners[#owners + 1] = 'alerter'
end
if st[5] == '1' then
  owners[#owners + 1] = 'admin'
end
if st[1] == '1' and #owners == 0 then
  owners[1] = (st[6] == 'alerter') and 'alerter' or 'admin'
end
-- (`suspended` is '1' or, not suspended, '0' and the mark admit.lua's clearMark keeps there.)
local users = spec.users and I(redis.call('ZCOUNT', KEYS[spec.users], spec.since, '+inf')) or '0'
return {st[1] == '1' and '1' or '0', I(inflight), st[2] or '0', st[3] or '0', windowStates(spec),
  table.concat(owners, ';'), st[7] or '0', st[8] or '0', st[9] or '0', st[10] or '0', users}
