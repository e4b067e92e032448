-- suspension: suspends or resumes a tenant and records the event, in one atomic step.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the tenant's state hash
-- KEYS[n]  the budgets' window hashes of the tenant's plan (indexes in the spec)
-- ARGV[1]  spec (JSON): now, bounds, budgets, tenant, org, op ('suspend' | 'resume'),
--          reason, by, budget, graceMs, eventId
--
-- Returns {changed ('1' | '0'), suspended ('1' | '0')}

local spec = cjson.decode(ARGV[1])
local want = (spec.op == 'suspend') and '1' or '0'
local current = redis.call('HGET', KEYS[2], 'suspended') or '0'
if current == want then
  return {'0', want}
end

redis.call('HSET', KEYS[2], 'suspended', want, 'suspendedBy', spec.by, 'changedAt', I(spec.now))
local fields = {
  'type', (want == '1') and 'tenant.suspended' or 'tenant.resumed', 'id', spec.eventId,
  'time', I(spec.now), 'tenant', spec.tenant, 'org', spec.org, 'by', spec.by,
  'windows', windowStates(spec),
}
if want == '1' then
  for _, kv in ipairs({{'reason', spec.reason}, {'budget', spec.budget}, {'graceMs', I(spec.graceMs)}}) do
    fields[#fields + 1] = kv[1]
    fields[#fields + 1] = kv[2]
  end
end
emit(fields)
return {'1', want}
