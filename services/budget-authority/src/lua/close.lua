-- close: settles, releases or expires a reservation in one atomic step. Idempotent: a second
-- close changes nothing and says what happened first.
--
-- The reservation record carries what its close needs: the levels and windows it held on
-- (keys are rebuilt from the record's org), its prices and what expiry bills. So a hold is
-- closed the same way after its tenant moved to another org or left the config. The usage is
-- billed to the windows the hold was admitted against, and also to the windows of the
-- tenant's current plan when they live in the same org (budgets added since admission).
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the reservation hash
-- KEYS[3]  the org's lease index
-- KEYS[4]  unused (the refusal summaries, for a uniform key layout)
-- KEYS[n]  the levels' state hashes and holds sorted sets and the budgets' window hashes of
--          the tenant's current plan, when it has one in this org (indexes in the spec)
-- ARGV[1]  spec (JSON): kp, org, tenant ('' with expire: whoever holds it), levels, budgets,
--          op ('settle' | 'release' | 'expire'), usage {prompt, completion, cached, w5, w1h,
--          reasoning} (cached and the cache writes are parts of prompt), outcome,
--          reason, eventId, overrunEventId, keepMs; `now` only under a test clock
--
-- Returns {status, billedTokens, costMicroUsd, windows, overrunTokens, overrunMicroUsd};
-- status is one of settled, released, expired, already_settled, already_released,
-- already_expired, unknown, not_due.

local spec = cjson.decode(ARGV[1])
spec.now = clockNow(spec)
local now = spec.now
local resKey = KEYS[2]

local f = redis.call('HMGET', resKey,
  'state', 'tenant', 'keyId', 'useCase', 'model', 'mode', 'heldT', 'heldU', 'chargedT',
  'chargedU', 'priceIn', 'priceOut', 'priceCached', 'createdAt', 'expiresAt', 'leaseMs',
  'levels', 'holds', 'billedT', 'billedU', 'potT', 'potU', 'sampleN', 'expB', 'expT', 'expU',
  'api', 'priceUn', 'priceW5', 'priceW1h', 'endUser')
local state, tenant = f[1], f[2]

if not state then
  if spec.op == 'release' then
    -- Tombstone: an admit with this id that arrives late is refused, not held forever.
    redis.call('HSET', resKey, 'state', 'released', 'tenant', spec.tenant)
    redis.call('PEXPIRE', resKey, spec.keepMs)
  end
  return {'unknown', '0', '0', windowStates(spec), '0', '0'}
end
if spec.tenant ~= '' and tenant ~= spec.tenant then
  return {'unknown', '0', '0', windowStates(spec), '0', '0'}
end
if state == 'settled' then
  return {'already_settled', f[19] or '0', f[20] or '0', windowStates(spec), '0', '0'}
end
if state == 'released' then
  return {'already_released', '0', '0', windowStates(spec), '0', '0'}
end
if state == 'expired' and spec.op == 'expire' then
  return {'already_expired', '0', '0', windowStates(spec), '0', '0'}
end
if spec.op == 'expire' and tonumber(f[15]) > now then
  return {'not_due', '0', '0', windowStates(spec), '0', '0'}
end

-- The hold is on its key's or end user's windows but the caller did not name them (the
-- sweeper, a client of the API): ask for a run with them, so the event reports those windows
-- too (the books, the rebuild and the alerter read windows from events). Nothing changed yet.
if spec.askSubjects and f[18] then
  local haveK, haveU = false, false
  for _, b in ipairs(spec.budgets) do
    haveK = haveK or b.scope == 'k'
    haveU = haveU or b.scope == 'u'
  end
  if (string.find(f[18], 'K', 1, true) and not haveK) or (string.find(f[18], 'U', 1, true) and not haveU) then
    return {'subjects', f[3] or '', f[31] or ''}
  end
end

local heldT, heldU = tonumber(f[7]), tonumber(f[8])
local levels = recordLevels(f[17])
local recorded = recordHolds(spec, levels, f[18], {tenant = tenant, keyId = f[3], endUser = f[31]})
local prechargedT, prechargedU = tonumber(f[9]), tonumber(f[10])
-- What an expiry already billed (worst case, see below); a late settle corrects it.
local expiredT, expiredU = tonumber(f[25]) or 0, tonumber(f[26]) or 0

-- The windows to bill: the recorded ones, then the current plan's not among them.
local targets, seen = {}, {}
for _, h in ipairs(recorded) do
  targets[#targets + 1] = {key = h[1], unit = h[2], b = h[3]}
  seen[h[1]] = true
end
for _, b in ipairs(spec.budgets) do
  local key = KEYS[b.key]
  if not seen[key] then
    targets[#targets + 1] = {key = key, unit = b.unit, b = b}
    seen[key] = true
  end
end
local function billAll(amountT, amountU)
  for _, t in ipairs(targets) do
    local bd = bounds(spec, t.b)
    slide(t.key, bd[2], bd[3])
    bill(t.key, bd[1], (t.unit == 'usd') and amountU or amountT)
  end
  for _, level in ipairs(levels) do
    local stateKey = tenantKey(spec, level, ':state')
    redis.call('HINCRBY', stateKey, 'billedT', I(amountT))
    redis.call('HINCRBY', stateKey, 'billedU', I(amountU))
  end
end

if state == 'held' then
  -- Give the hold back on every window it was recorded against, and leave the in-flight sets.
  local potT, potU = tonumber(f[21]) or 0, tonumber(f[22]) or 0
  for _, h in ipairs(recorded) do
    hold(h[1], (h[2] == 'usd') and -heldU or -heldT)
    hold(h[1], (h[2] == 'usd') and -potU or -potT, 'p')
  end
  for _, level in ipairs(levels) do
    redis.call('ZREM', tenantKey(spec, level, ':holds'), spec.resId)
  end
  redis.call('ZREM', KEYS[3], spec.resId)
end

local billedT, costU, chargeT, chargeU = 0, 0, 0, 0
local overT, overU = 0, 0
local closed, eventType = 'released', 'reservation.released'
if spec.op == 'settle' then
  local u = spec.usage
  -- Each category at its price. A record written before cache-write prices existed has
  -- priceIn as its input price, and bills writes as input.
  local input = tonumber(f[28]) or tonumber(f[11])
  local price = {input, tonumber(f[12]), tonumber(f[13]), tonumber(f[29]) or input,
    tonumber(f[30]) or input}
  billedT = u.prompt + u.completion
  costU = cost(u.prompt, u.cached, u.completion, price, u.w5, u.w1h)
  chargeT = billedT - prechargedT - expiredT
  chargeU = costU - prechargedU - expiredU
  billAll(chargeT, chargeU)
  -- An overrun: the provider reported more than the hold paid for. The truth is billed (above)
  -- and the excess recorded, so it is never silent.
  if f[6] == 'reserve' or f[6] == 'adaptive' then
    overT = math.max(0, billedT - prechargedT - heldT)
    overU = math.max(0, costU - prechargedU - heldU)
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
  -- Nobody knows how this call ended (its edge died mid-call). With `expB` (reserve's
  -- default) it is billed at its worst case, so the books never show less than the model may
  -- have billed; a settle that arrives later corrects it to the real usage.
  if f[24] == '1' then
    chargeT, chargeU = heldT, heldU
    billAll(chargeT, chargeU)
  end
  closed, eventType = 'expired', 'reservation.expired'
elseif state == 'expired' then
  -- A release after the expiry (it waited in the closes stream while the authority was away,
  -- and the lease ran out first): the edge knows the call billed nothing, as a release in time
  -- would have, so what the expiry billed at its worst case is given back.
  chargeT, chargeU = -expiredT, -expiredU
  billAll(chargeT, chargeU)
end

redis.call('HSET', resKey, 'state', closed, 'closedAt', I(now), 'billedT', I(billedT), 'billedU', I(costU))
if spec.op == 'expire' then
  redis.call('HSET', resKey, 'expT', I(chargeT), 'expU', I(chargeU))
end
redis.call('PEXPIRE', resKey, spec.keepMs)

local windows = windowStates(spec)
local api = f[27] or 'chat'
local fields = {
  'type', eventType, 'id', spec.eventId, 'time', I(now), 'tenant', tenant, 'org', spec.org,
  'reservationId', spec.resId, 'keyId', f[3], 'useCase', f[4], 'model', f[5], 'mode', f[6],
  'api', api,
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
  add('cacheWrite5mTokens', I(spec.usage.w5))
  add('cacheWrite1hTokens', I(spec.usage.w1h))
  add('reasoningTokens', I(spec.usage.reasoning))
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
local endUser = f[31] or ''
if endUser ~= '' then
  add('endUser', endUser)
end
emit(fields)

if overT > 0 or overU > 0 then
  local leaf = tenantKey(spec, tenant, ':state')
  redis.call('HINCRBY', leaf, 'overN', 1)
  redis.call('HINCRBY', leaf, 'overT', I(overT))
  redis.call('HINCRBY', leaf, 'overU', I(overU))
  redis.call('HSET', leaf, 'overAt', I(now))
  local over = {
    'type', 'reservation.overrun', 'id', spec.overrunEventId, 'time', I(now),
    'tenant', tenant, 'org', spec.org, 'reservationId', spec.resId, 'keyId', f[3],
    'useCase', f[4], 'model', f[5], 'mode', f[6], 'api', api,
    'heldTokens', I(heldT + prechargedT), 'heldMicroUsd', I(heldU + prechargedU),
    'billedTokens', I(billedT), 'costMicroUsd', I(costU),
    'overrunTokens', I(overT), 'overrunMicroUsd', I(overU), 'windows', windows,
  }
  if endUser ~= '' then
    over[#over + 1] = 'endUser'
    over[#over + 1] = endUser
  end
  emit(over)
end

return {closed, I(billedT), I(costU), windows, I(overT), I(overU)}
