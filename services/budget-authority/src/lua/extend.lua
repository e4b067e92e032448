-- extend: grows a live hold so it covers more output ("holds that grow", adaptive mode). The
-- edge asks before the streamed output passes what the hold covers; the hold grows by as much
-- of the ask as every window can still pay for; with no room at all the call must end
-- (finish_reason length).
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the reservation hash
-- KEYS[n]  the levels' state hashes and holds sorted sets, the budgets' window hashes of the
--          tenant's current plan (indexes in the spec; limits are checked against it)
-- ARGV[1]  spec (JSON): budgets, resId, outputTokens (the total output the hold should
--          cover), eventId; billedPrompt, billedOutput, billedTools (`kind:count`,...) and
--          toolPrices (the model's current fees) for a failed attempt's bill; `now` only
--          under a test clock
--
-- Returns {status ('extended' | 'unchanged' | 'refused' | 'closed' | 'unknown'), heldTokens,
--          heldMicroUsd, coveredOutputTokens, windows}; {'subjects', keyId, endUser} (the caller
--          asked, and the hold is on windows of theirs it did not name) or {'keys', key...}
--          (recorded windows the plan lacks: run again with them in KEYS), changing nothing

local spec = cjson.decode(ARGV[1])
spec.now = clockNow(spec)
local now = spec.now
local v = redis.call('HMGET', KEYS[2], 'state', 'heldT', 'heldU', 'max', 'cov', 'r')
local f = {v[1]}
if v[1] then
  -- As this script read the record before the fixed text (lib.lua's RECORD_FIXED) existed;
  -- f[13] the hold's output price (priceHOut; priceOut on a record from before audio prices).
  local x = recordFixed(KEYS[2], v[6])
  f = {v[1], x[1], x[3], x[4], x[5], x[6], v[2], v[3], x[8], v[4], v[5], x[9], x[23] or x[10], x[11],
    x[17], x[16], x[7], x[20]}
end
if not f[1] or f[2] ~= spec.tenant then
  return {'unknown', '0', '0', '0', windowStates(spec)}
end
local heldT, heldU, covered = tonumber(f[7]), tonumber(f[8]), tonumber(f[11])
if f[1] ~= 'held' then
  return {'closed', f[7], f[8], f[11] or '0', windowStates(spec)}
end
-- `billedPrompt`/`billedOutput`: an attempt of the call that failed in its stream billed that;
-- the hold grows by it, all or nothing, before the edge retries the call on it.
local billed = spec.billedPrompt ~= nil
local want = billed and covered or math.min(spec.outputTokens, tonumber(f[10]))
if not billed and want <= covered then
  return {'unchanged', f[7], f[8], f[11], windowStates(spec)}
end

local prompt = tonumber(f[9])
local price = {tonumber(f[12]), tonumber(f[13]), tonumber(f[14])}
local function growth(out)
  return out - covered, cost(prompt, 0, out, price) - cost(prompt, 0, covered, price)
end

-- The windows the hold was recorded against, with their room now.
local limits = {}
for _, b in ipairs(spec.budgets) do
  limits[KEYS[b.key]] = b
end
local targets = {}
local rec = {tenant = f[2], keyId = f[3], endUser = f[18]}
-- A hold grows only where every limit it may be billed against is checked: a window of a
-- level the tenant has left (moved under another parent) is still limited but not in this
-- plan, and an enforced window of the plan the hold is not on (a budget or a parent added
-- since admission) is billed the call's whole usage at settle. Growing would bill either past
-- its limit unseen, so such a hold stays as it is and the call ends at what it covers.
local inPlan, onHold, unchecked = {}, {}, false
for _, lv in ipairs(spec.levels) do
  inPlan[lv.tenant] = true
end
local recorded = recordHolds(spec, recordLevels(f[16]), f[15], rec)
for _, h in ipairs(recorded) do
  local key, unit = h[1], h[2]
  onHold[key] = true
  unchecked = unchecked or (not h[3].scope and not inPlan[h[3].tenant])
  local b = limits[key]
  if not b and h[3].scope and spec.askSubjects then
    -- A key's or end user's window the caller did not name: ask for a run with their limits
    -- (never grow a hold past a window whose limit this run does not know). Nothing changed.
    return {'subjects', f[3] or '', f[18] or ''}
  end
  local room = nil
  if b and b.enforce then
    local bd = bounds(spec, b)
    local s, held, p, _, _, fresh = slide(key, bd[2], bd[3])
    keepUserWindow(b, key, fresh)
    room = b.limit - s - held - p
  end
  targets[#targets + 1] = {key = key, unit = unit, room = room}
end
for _, b in ipairs(spec.budgets) do
  unchecked = unchecked or (b.enforce and not onHold[KEYS[b.key]])
end
if unchecked then
  return {'refused', f[7], f[8], f[11], windowStates(spec)}
end
-- Every window the hold grows on is in KEYS (lib.lua undeclared): a recorded one the plan no
-- longer has (its budget removed while the call streamed) is asked for, changing nothing.
local onKeys = {}
for i, t in ipairs(targets) do
  onKeys[i] = t.key
end
local missing = undeclared(onKeys)
if missing then
  return {'keys', unpack(missing)}
end

-- Holds `addT`/`addU` more on every window of the hold, covering `cov` output tokens, and
-- records it (a `reservation.extended` event); returns the reply.
local function grown(addT, addU, cov)
  for _, t in ipairs(targets) do
    hold(t.key, (t.unit == 'usd') and addU or addT)
  end
  heldT, heldU = heldT + addT, heldU + addU
  redis.call('HSET', KEYS[2], 'heldT', I(heldT), 'heldU', I(heldU), 'cov', I(cov))
  -- The hold grew on every window it is on: a recorded one the plan no longer has (its budget
  -- removed while the call streamed; no limit to check) is listed after the plan's, as a close
  -- lists it.
  local windows = withRemoved(spec, windowStates(spec), recorded)
  local event = {
    'type', 'reservation.extended', 'id', spec.eventId, 'time', I(now), 'tenant', f[2],
    'org', spec.org, 'reservationId', spec.resId, 'keyId', f[3], 'useCase', f[4], 'model', f[5],
    'mode', f[6], 'heldTokens', I(heldT), 'heldMicroUsd', I(heldU),
    'addedTokens', I(addT),
    'addedMicroUsd', I(addU), 'coveredOutputTokens', I(cov), 'windows', windows,
  }
  -- At its default (chat) left out: every reader fills it.
  if (f[17] or 'chat') ~= 'chat' then
    event[#event + 1] = 'api'
    event[#event + 1] = f[17]
  end
  if (f[18] or '') ~= '' then
    event[#event + 1] = 'endUser'
    event[#event + 1] = f[18]
  end
  emit(event)
  return {'extended', I(heldT), I(heldU), I(cov), windows}
end

if billed then
  local addT = spec.billedPrompt + spec.billedOutput
  local addU = cost(spec.billedPrompt, 0, spec.billedOutput, price)
  if (spec.billedTools or '') ~= '' then
    -- Its provider-run tool uses at the fees the record was admitted with (as close.lua bills
    -- them; the model's current ones for a record without): the settle bills them on top of
    -- the retry's own, which the hold already covers.
    local _, fee = toolFees(spec.billedTools, redis.call('HGET', KEYS[2], 'tf') or spec.toolPrices or '')
    addU = addU + fee
  end
  for _, t in ipairs(targets) do
    if t.room and t.room < ((t.unit == 'usd') and addU or addT) then
      return {'refused', f[7], f[8], f[11], windowStates(spec)}
    end
  end
  if addT == 0 and addU == 0 then
    return {'unchanged', f[7], f[8], f[11], windowStates(spec)}
  end
  return grown(addT, addU, covered)
end

-- Grant as much of the growth as every window can pay for, in closed form: a tokens window
-- pays for `room` more output; a usd window for output whose total cost stays within the
-- room plus what the covered output already costs (costs round up per call, so the bound
-- compares pico-USD before rounding, exactly).
local grant = want
local coveredU = cost(prompt, 0, covered, price)
for _, t in ipairs(targets) do
  if t.room then
    if t.unit == 'tokens' then
      grant = math.min(grant, covered + t.room)
    elseif price[2] > 0 then
      local pico = (t.room + coveredU) * 1000000 - prompt * price[1]
      grant = math.min(grant, math.floor(pico / price[2]))
    elseif t.room < 0 then
      grant = covered
    end
  end
end
if grant <= covered then
  return {'refused', f[7], f[8], f[11], windowStates(spec)}
end
local addT, addU = growth(grant)
return grown(addT, addU, grant)
