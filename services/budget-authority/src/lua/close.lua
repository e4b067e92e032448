-- close: settles, releases or expires a reservation in one atomic step. Idempotent: a second
-- close changes nothing and says what happened first.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the reservation hash
-- KEYS[n]  the levels' state hashes and holds sorted sets, the budgets' window hashes of the
--          tenant's current plan (indexes in the spec). The keys the hold was recorded
--          against are read from the reservation itself (same hash slot: the org's tag).
-- ARGV[1]  spec (JSON): now, bounds, levels, budgets, op ('settle' | 'release' | 'expire'),
--          usage {prompt, completion, cached}, outcome, reason, eventId
--
-- Returns {status, billedTokens, costMicroUsd, windows}; status is one of settled, released,
-- expired, already_settled, already_released, already_expired, unknown, not_due.

local spec = cjson.decode(ARGV[1])
local now = spec.now
local resKey = KEYS[2]

local f = redis.call('HMGET', resKey,
  'state', 'tenant', 'keyId', 'useCase', 'model', 'mode', 'heldT', 'heldU', 'chargedT',
  'chargedU', 'priceIn', 'priceOut', 'priceCached', 'createdAt', 'expiresAt', 'leaseMs',
  'levels', 'holds', 'billedT', 'billedU', 'potT', 'potU', 'sampleN')
local state, tenant = f[1], f[2]

if not state then
  if spec.op == 'release' then
    -- Tombstone: an admit with this id that arrives late is refused, not held forever.
    redis.call('HSET', resKey, 'state', 'released', 'tenant', spec.tenant)
    redis.call('PEXPIRE', resKey, spec.keepMs)
  end
  return {'unknown', '0', '0', windowStates(spec)}
end
if tenant ~= spec.tenant then
  return {'unknown', '0', '0', windowStates(spec)}
end
if state == 'settled' then
  return {'already_settled', f[19] or '0', f[20] or '0', windowStates(spec)}
end
if state == 'released' then
  return {'already_released', '0', '0', windowStates(spec)}
end
if state == 'expired' and spec.op ~= 'settle' then
  return {'already_expired', '0', '0', windowStates(spec)}
end
if spec.op == 'expire' and tonumber(f[15]) > now then
  return {'not_due', '0', '0', windowStates(spec)}
end

local heldT, heldU = tonumber(f[7]), tonumber(f[8])
local levels = recordLevels(f[17])
local prechargedT, prechargedU = tonumber(f[9]), tonumber(f[10])

if state == 'held' then
  -- Give the hold back on every window it was recorded against, and leave the in-flight sets.
  local potT, potU = tonumber(f[21]) or 0, tonumber(f[22]) or 0
  for _, h in ipairs(recordHolds(spec, levels, f[18])) do
    hold(h[1], (h[2] == 'usd') and -heldU or -heldT)
    hold(h[1], (h[2] == 'usd') and -potU or -potT, 'p')
  end
  for _, level in ipairs(levels) do
    redis.call('ZREM', tenantKey(spec, level, ':holds'), spec.resId)
  end
else
  -- A settle after the lease expired: the hold was already given back; bill the usage.
  heldT, heldU = 0, 0
end

local billedT, costU, chargeT, chargeU = 0, 0, 0, 0
local closed, eventType = 'released', 'reservation.released'
if spec.op == 'settle' then
  local u = spec.usage
  local price = {tonumber(f[11]), tonumber(f[12]), tonumber(f[13])}
  billedT = u.prompt + u.completion
  costU = cost(u.prompt, u.cached, u.completion, price)
  chargeT, chargeU = billedT - prechargedT, costU - prechargedU
  for _, b in ipairs(spec.budgets) do
    local bd = bounds(spec, b)
    slide(KEYS[b.key], bd[2], bd[3])
    bill(KEYS[b.key], bd[1], (b.unit == 'usd') and chargeU or chargeT)
  end
  for _, level in ipairs(levels) do
    local stateKey = tenantKey(spec, level, ':state')
    redis.call('HINCRBY', stateKey, 'billedT', I(chargeT))
    redis.call('HINCRBY', stateKey, 'billedU', I(chargeU))
  end
  local sampleN = tonumber(f[23]) or 0
  if sampleN > 0 then
    -- adaptive: remember the real output size for the next estimates.
    local samples = tenantKey(spec, tenant, ':out:' .. f[4] .. ':' .. f[5])
    redis.call('LPUSH', samples, I(u.completion))
    redis.call('LTRIM', samples, 0, sampleN - 1)
  end
  closed, eventType = 'settled', 'reservation.settled'
elseif spec.op == 'expire' then
  closed, eventType = 'expired', 'reservation.expired'
end

redis.call('HSET', resKey, 'state', closed, 'closedAt', I(now), 'billedT', I(billedT), 'billedU', I(costU))
redis.call('PEXPIRE', resKey, spec.keepMs)

local windows = windowStates(spec)
local fields = {
  'type', eventType, 'id', spec.eventId, 'time', I(now), 'tenant', tenant, 'org', spec.org,
  'reservationId', spec.resId, 'keyId', f[3], 'useCase', f[4], 'model', f[5], 'mode', f[6],
  'heldTokens', I(heldT), 'heldMicroUsd', I(heldU),
  'chargedTokens', I(chargeT), 'chargedMicroUsd', I(chargeU), 'windows', windows,
}
local function add(k, v)
  fields[#fields + 1] = k
  fields[#fields + 1] = v
end
if spec.op == 'settle' then
  add('promptTokens', I(spec.usage.prompt))
  add('completionTokens', I(spec.usage.completion))
  add('cachedPromptTokens', I(spec.usage.cached))
  add('billedTokens', I(billedT))
  add('costMicroUsd', I(costU))
  add('outcome', spec.outcome)
  add('durationMs', I(math.max(0, now - tonumber(f[14]))))
elseif spec.op == 'release' then
  add('reason', spec.reason)
  add('durationMs', I(math.max(0, now - tonumber(f[14]))))
else
  add('leaseMs', f[16])
end
emit(fields)

return {closed, I(billedT), I(costU), windows}
