-- suspension: suspends or resumes a tenant and records the event, in one atomic step.
--
-- A suspension has owners: the alerter (at the hard limit) and admins. The tenant stays
-- suspended while any owner holds it. The alerter's automatic resume (`window_freed`) lifts
-- only its own suspension; an admin's resume lifts every one. An owner joining an already
-- suspended tenant is recorded (and evented, so a rebuild knows) without ending calls again
-- beyond what its own grace says.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the tenant's state hash (fields: suspended, so:<owner>)
-- KEYS[n]  the budgets' window hashes of the tenant's plan (indexes in the spec)
-- ARGV[1]  spec (JSON): budgets, tenant, org, op ('suspend' | 'resume'), reason, by
--          ('alerter' | 'admin' | 'window_freed'), budget, graceMs, eventId; `now` only
--          under a test clock
--
-- Returns {changed ('1' | '0'), suspended ('1' | '0'), owners (';'-joined)}

local spec = cjson.decode(ARGV[1])
spec.now = clockNow(spec)
local OWNERS = {'alerter', 'admin'}
local v = redis.call('HMGET', KEYS[2], 'suspended', 'suspendedBy', 'so:alerter', 'so:admin')
local suspended = v[1] == '1'
local owned = {alerter = v[3] == '1', admin = v[4] == '1'}
if suspended and not owned.alerter and not owned.admin then
  -- Suspended before owners were recorded: its last suspender owns it.
  owned[(v[2] == 'alerter') and 'alerter' or 'admin'] = true
end

local function ownerList()
  local out = {}
  for _, o in ipairs(OWNERS) do
    if owned[o] then
      out[#out + 1] = o
    end
  end
  return table.concat(out, ';')
end

local function event(kind, extra)
  local fields = {
    'type', kind, 'id', spec.eventId, 'time', I(spec.now), 'tenant', spec.tenant,
    'org', spec.org, 'by', spec.by, 'windows', windowStates(spec),
  }
  for i = 1, #extra do
    fields[#fields + 1] = extra[i]
  end
  emitFlat(fields)
end

if spec.op == 'suspend' then
  if owned[spec.by] then
    return {'0', '1', ownerList()}
  end
  owned[spec.by] = true
  redis.call('HSET', KEYS[2], 'suspended', '1', 'suspendedBy', spec.by, 'so:' .. spec.by, '1',
    'changedAt', I(spec.now))
  event('tenant.suspended', {'reason', spec.reason, 'budget', spec.budget, 'graceMs', I(spec.graceMs)})
  return {'1', '1', ownerList()}
end

-- resume
local lifted = false
for _, o in ipairs(OWNERS) do
  if owned[o] and (spec.by == 'admin' or o == 'alerter') then
    owned[o] = false
    lifted = true
    redis.call('HDEL', KEYS[2], 'so:' .. o)
  end
end
if not suspended or not lifted then
  return {'0', suspended and '1' or '0', ownerList()}
end
if owned.alerter or owned.admin then
  -- Another owner still holds it: the tenant stays suspended, nothing to announce.
  return {'1', '1', ownerList()}
end
redis.call('HSET', KEYS[2], 'suspended', '0', 'suspendedBy', spec.by, 'changedAt', I(spec.now))
event('tenant.resumed', {})
return {'1', '0', ownerList()}
