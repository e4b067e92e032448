-- close: settles, releases or expires a reservation in one atomic step. Idempotent: a second
-- close changes nothing and says what happened first.
--
-- The reservation record carries what its close needs: the levels and windows it held on
-- (keys are rebuilt from the record's org), its prices and what expiry bills. So a hold is
-- closed the same way after its tenant moved to another org or left the config. The usage is
-- billed to the windows the hold was admitted against, and also to the windows of the
-- tenant's current plan when they live in the same org (budgets added since admission: the
-- whole usage of a settle, as neither the admission nor an expiry charged them anything). The
-- event's chargedTokens/MicroUsd is what the other windows got; the state of such a window,
-- when its charge differs, ends in `,c,<charge>` (WindowState.charged), so a rebuild and the
-- alerter read what this close added to it. A recorded window the plan no longer has (its
-- budget removed, its tenant moved or removed, while the call was held) is listed after the
-- plan's with limit 0, enforce 0 and `,r` (WindowState.removed): the event names every window
-- the close changed (the drift audit, a rebuild and the alerter read windows from events).
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the reservation hash
-- KEYS[3]  the org's lease index: the root level's in-flight set (the plan's root level's holds
--          index is 3; a record's root level is its org), left with the levels' sets
-- KEYS[4]  unused (the refusal summaries, for a uniform key layout)
-- KEYS[n]  the levels' state hashes and holds sorted sets and the budgets' window hashes of
--          the tenant's current plan, when it has one in this org (indexes in the spec)
-- ARGV     positional (close.ts): now ('' = Redis TIME; a test clock's instant), resId,
--          eventId, op ('settle' | 'release' | 'expire'), the usage (prompt, completion,
--          cached: a part of prompt, reasoning), outcome, askSubjects, the service tier the
--          provider reported ('' none: the tier held is billed);
--          ARGV[12] the overrun event's id, a release's reason and the requests it keeps
--          (answeredRequests, when named), '\1'-joined (lib.lua's fields: read on an overrun or
--          a release);
--          ARGV[13] the usage's rarer parts, '' when the provider reported none of them, else
--          '\1'-joined: the cache writes (5-minute, 1-hour: parts of prompt), the audio usage
--          (audio prompt, audio completion: parts of prompt and completion), the prompt of the
--          call's largest request ('': one request, the prompt; its long-context line is per
--          request), the provider-run tool uses reported (`kind:count` joined by ','; '' none),
--          the model's current tool-use prices (for a record without `tf`: one rebuilt from
--          events);
--          then the plan (lib.lua's readPlan; tenant '' with expire: whoever holds it). An end
--          user's windows added here are kept END_USER_KEEP_MS (lib.lua) past its admission.
--
-- Returns {status, billedTokens, costMicroUsd, windows, overrunTokens, overrunMicroUsd, on
--          [, moving]};
-- on (a close that closed the hold): the upstream whose capacity the call holds (move.lua
-- `up`: its admission's, or its last capacity.move's; '': one that declares none), '-' when
-- the record has none (admitted before admissions recorded it, never moved); moving: the
-- fallback of a capacity.move claimed and not recorded (move.lua `mp`), whose take is given
-- back (`on` is then the upstream that move leaves: the call never went to the fallback);
-- status is one of settled, released, expired, already_settled, already_released,
-- already_expired, unknown, not_due. With askSubjects, before any change: {'tenant', tenant,
-- keyId, endUser} when the plan names no tenant (tenant '': the sweeper's expiry), {'subjects',
-- keyId, endUser} when the hold is on key or end-user windows the plan does not name; then,
-- also before any change, {'keys', key...} with the keys it would touch that KEYS lacks (the
-- record's levels and windows when not the plan's, the adaptive samples list, the end user's
-- registries): the caller runs it again with them added to KEYS (lib.lua undeclared).

local spec = readPlan(14)
spec.now = tonumber(ARGV[1])
-- The call's fields are locals, not fields of `spec` (each new field of a table is a rehash).
-- (The overrun event's id and a release's reason, ARGV[12], are read where used.)
local resId, eventId, op = ARGV[2], ARGV[3], ARGV[4]
local outcome, askSubjects = ARGV[9], ARGV[10] == '1'
spec.now = clockNow(spec)
local now = spec.now
local resKey = KEYS[2]

-- The record: f[1..8] = state, heldT, heldU, createdAt, r, up (the upstream whose capacity the
-- call holds: move.lua; returned, for the close of that capacity), mp (a capacity.move claimed
-- and not recorded: move.lua), rq (the retries capacity.retry counted: retry.lua), nu (the
-- call tracked its end user: admit.lua; its close may forget it, below). The rest is
-- read only when needed
-- (each field HMGET reads costs as much as a third of an HGET): expiresAt for an expiry;
-- chargedT, chargedU, potT, potU unless the record is reserve's with `r` (admit writes them
-- only when not 0, and only estimate and adaptive calls have them); billedT, billedU of a
-- settled record, expT, expU of an expired one.
local f = redis.call('HMGET', resKey, 'state', 'heldT', 'heldU', 'createdAt', 'r', 'up', 'mp', 'rq', 'nu')
local state = f[1]

if not state then
  if op == 'release' then
    -- Tombstone: an admit with this id that arrives late is refused, not held forever.
    redis.call('HSET', resKey, 'state', 'released', 'tenant', spec.tenant)
    redis.call('PEXPIRE', resKey, T(spec.keepMs))
  end
  return {'unknown', '0', '0', windowStates(spec), '0', '0'}
end
local tenant, _, keyId, useCase, model, mode, api, _, priceIn, priceOut, priceCached, priceUn,
  priceW5, priceW1h, leaseMs, levelsText, holdsText, sampleN, expB, endUser, priceAIn, priceAOut,
  _, heldTier, tiersText, longText = unpack(recordFixed(resKey, f[5]))
if spec.tenant ~= '' and tenant ~= spec.tenant then
  return {'unknown', '0', '0', windowStates(spec), '0', '0'}
end
if state == 'settled' then
  local billed = redis.call('HMGET', resKey, 'billedT', 'billedU')
  return {'already_settled', billed[1] or '0', billed[2] or '0', windowStates(spec), '0', '0'}
end
if state == 'released' then
  return {'already_released', '0', '0', windowStates(spec), '0', '0'}
end
if state == 'expired' and op == 'expire' then
  return {'already_expired', '0', '0', windowStates(spec), '0', '0'}
end
if op == 'expire' and tonumber(redis.call('HGET', resKey, 'expiresAt')) > now then
  return {'not_due', '0', '0', windowStates(spec), '0', '0'}
end
keyId, endUser, api = keyId or '', endUser or '', api or 'chat'

-- The sweeper found the hold in its org's lease index, not knowing whose it is: ask for a run
-- with its tenant's plan, so the event reports the windows the expiry bills (the alerter and a
-- rebuild read them there). Nothing changed yet.
if askSubjects and spec.tenant == '' then
  return {'tenant', tenant, keyId, endUser}
end

-- The hold is on its key's or end user's windows but the caller did not name them (the
-- sweeper, a client of the API): ask for a run with them, so the event reports those windows
-- too (the books, the rebuild and the alerter read windows from events). Nothing changed yet.
-- Whether the hold is on a key's or an end user's windows (found once: asPlanned below).
local ownHolds = holdsText and string.find(holdsText, '[KU]')
if askSubjects and ownHolds then
  local haveK, haveU = false, false
  for _, b in ipairs(spec.budgets) do
    haveK = haveK or b.scope == 'k'
    haveU = haveU or b.scope == 'u'
  end
  if (string.find(holdsText, 'K', 1, true) and not haveK) or (string.find(holdsText, 'U', 1, true) and not haveU) then
    return {'subjects', keyId, endUser}
  end
end

-- `x + 0` (lib.lua's slide says why not tonumber): the record's amounts are integers.
local heldT, heldU = f[2] + 0, f[3] + 0
local prechargedT, prechargedU, potT, potU = 0, 0, 0, 0
if mode ~= 'reserve' or not f[5] then
  local x = redis.call('HMGET', resKey, 'chargedT', 'chargedU', 'potT', 'potU')
  prechargedT, prechargedU = x[1] and x[1] + 0 or 0, x[2] and x[2] + 0 or 0
  potT, potU = x[3] and x[3] + 0 or 0, x[4] and x[4] + 0 or 0
end
-- What an expiry already billed (worst case, see below); a late settle corrects it.
local expiredT, expiredU = 0, 0
if state == 'expired' then
  local e = redis.call('HMGET', resKey, 'expT', 'expU')
  expiredT, expiredU = tonumber(e[1]) or 0, tonumber(e[2]) or 0
end

-- The windows to change: the recorded ones (their holds given back), then the current plan's
-- not among them (billed only). When the record was admitted on this very plan (the same
-- levels and windows of the tenant's own), they are the plan's budgets, in its order.
local targets = {}
-- The record's holds (recordHolds), when not admitted on this very plan.
local recorded
local asPlanned = holdsText == spec.holdsText and levelsText == spec.levelsText
  and not ownHolds
-- The levels' state and holds keys: the plan's own (the same keys) when admitted on it.
-- (Made with room for 4 levels: filling an empty table resizes it at 1, 2 and 4 entries.)
local stateKeys, holdsKeys = {nil, nil, nil, nil}, {nil, nil, nil, nil}
if asPlanned then
  for i = 1, #spec.levels do
    local lv = spec.levels[i]
    stateKeys[i], holdsKeys[i] = KEYS[lv.state], KEYS[lv.holds]
  end
else
  local levels = recordLevels(levelsText)
  for i, level in ipairs(levels) do
    stateKeys[i], holdsKeys[i] = tenantKey(spec, level, ':state'), tenantKey(spec, level, ':holds')
  end
  local seen = {}
  -- A recorded window the plan no longer has (its budget removed, or the tenant moved or left
  -- the config, while the call was held) is listed after the plan's in the event (withRemoved).
  recorded = recordHolds(spec, levels, holdsText, {tenant = tenant, keyId = keyId, endUser = endUser})
  -- A level its team moved under while it was held (admit.lua's adopt: '@' codes) counted it
  -- in flight too: it leaves that set as well (its lifetime totals are its levels' alone).
  local moved = string.find(holdsText, '@', 1, true) and {}
  if moved then
    for _, l in ipairs(levels) do
      moved[l] = true
    end
  end
  for _, h in ipairs(recorded) do
    targets[#targets + 1] = {key = h[1], unit = h[2], b = h[3], held = true}
    seen[h[1]] = #targets
    if moved and h[3].scope == false then
      local t = h[3].tenant
      if not moved[t] then
        moved[t] = true
        holdsKeys[#holdsKeys + 1] = tenantKey(spec, t, ':holds')
      end
    end
  end
  for _, b in ipairs(spec.budgets) do
    local key = KEYS[b.key]
    local at = seen[key]
    if not at then
      targets[#targets + 1] = {key = key, unit = b.unit, b = b}
      seen[key] = #targets
    else
      -- A recorded window the plan has: in KEYS (the plan's).
      targets[at].planned = true
    end
  end
end

-- Every key this close touches is in KEYS (lib.lua undeclared): the plan's are; the record's
-- levels and windows the plan lacks (not admitted on this very plan), the adaptive output
-- samples, and the registries of an end user this call tracked are asked for, before any
-- change, and the close runs again with them. Only keys not known to be the plan's are looked
-- for in KEYS.
local needed
if not asPlanned then
  needed = {}
  -- The record's levels: the plan's own when the same (their sets in KEYS), but for the sets
  -- of levels its team moved under (after them in holdsKeys).
  local from = levelsText == spec.levelsText and #spec.levels + 1 or 1
  if from == 1 then
    for n = 1, #stateKeys do
      needed[#needed + 1] = stateKeys[n]
    end
  end
  for n = from, #holdsKeys do
    needed[#needed + 1] = holdsKeys[n]
  end
  for _, t in ipairs(targets) do
    if t.held and not t.planned then
      needed[#needed + 1] = t.key
    end
    if not t.held and t.b.scope == 'u' then
      -- An end-user window added since admission: the end user is registered (below).
      needed[#needed + 1] = tenantKey(spec, spec.tenant, ':users')
      needed[#needed + 1] = tenantKey(spec, spec.tenant, ':users:filter')
    end
  end
end
if op == 'settle' and (N(sampleN) or 0) > 0 then
  needed = needed or {}
  needed[#needed + 1] = tenantKey(spec, tenant, ':out:' .. useCase .. ':' .. model)
end
-- A call that tracked its end user (`nu`) may forget it (below), from its tenant's registry
-- and its key's.
local tracked = f[9] and endUser ~= ''
if tracked then
  needed = needed or {}
  needed[#needed + 1] = tenantKey(spec, tenant, ':users')
  if keyId ~= '' then
    needed[#needed + 1] = keyKey(spec, tenant, keyId, ':users')
  end
end
local missing = needed and #needed > 0 and undeclared(needed)
if missing then
  return {'keys', unpack(missing)}
end

local billedT, costU, chargeT, chargeU = 0, 0, 0, 0
-- A settle's usage as billed (settleParts) and its service tier, for its event.
local usage, billedTier
local billedLong = false
-- Provider-run tool uses billed per use and their fee (part of costU), for the event.
local toolUses, toolFee
local overT, overU = 0, 0
local billing = false
local closed, eventType = 'released', 'reservation.released'
if op == 'settle' then
  -- The parts are most often 0: N's kept texts.
  -- The usage's rarer parts (ARGV[13]) when the provider reported any, else none.
  local w5, w1h, aIn, aOut, largest, uses, usePrices = '0', '0', '0', '0', '', '', ''
  if ARGV[13] ~= '' then
    w5, w1h, aIn, aOut, largest, uses, usePrices = fields(13, 7)
  end
  local u = settleParts({prompt = ARGV[5] + 0, completion = ARGV[6] + 0, cached = N(ARGV[7]),
    w5 = N(w5), w1h = N(w1h), aIn = N(aIn), aOut = N(aOut)})
  usage = u
  -- Each category at its price. A record written before cache-write prices existed has
  -- priceIn as its input price, and bills writes as input; one written before audio prices
  -- existed bills audio as text.
  local input = N(priceUn) or N(priceIn)
  local output = N(priceOut)
  local price = {input, output, N(priceCached), N(priceW5) or input,
    N(priceW1h) or input, N(priceAIn) or input, N(priceAOut) or output}
  -- At the tier the provider served it at (or the one held): a dearer one than held is billed
  -- in full (an overrun below), a cheaper one (priority downgraded to default) at its price.
  billedTier, price = tierPrice(ARGV[11], heldTier, tiersText, price)
  -- Above the billed tier's long-context line (the provider's input, cache reads and writes
  -- included) all of it at that tier's long-context prices: a call held short that the
  -- provider bills long (input the edge could not see) is billed in full, an overrun below.
  -- The line is per request: a call retried after an error in its stream adds its requests'
  -- prompts, and is long when its largest request is (ARGV[13]'s 5th), not when their sum is.
  local long = longPrice(billedTier, longText, largest ~= '' and tonumber(largest) or u.prompt)
  if long then
    price, billedLong = long, true
  end
  billedT = u.prompt + u.completion
  costU = cost(u.prompt, u.cached, u.completion, price, u.w5, u.w1h, u.aIn, u.aOut)
  if uses ~= '' then
    -- Per use, at the prices the record was admitted with (the hold covered its bound at
    -- them); more uses than held are billed in full, an overrun below like any other.
    toolUses, toolFee = toolFees(uses, redis.call('HGET', resKey, 'tf') or usePrices)
    costU = costU + toolFee
  end
  chargeT = billedT - prechargedT - expiredT
  chargeU = costU - prechargedU - expiredU
  billing = true
  -- An overrun: the provider reported more than the hold paid for. The truth is billed
  -- and the excess recorded, so it is never silent.
  if mode == 'reserve' or mode == 'adaptive' then
    -- (Comparisons, not math.max: a C call costs more.)
    overT, overU = billedT - prechargedT - heldT, costU - prechargedU - heldU
    overT, overU = overT > 0 and overT or 0, overU > 0 and overU or 0
  end
  local samples = N(sampleN) or 0
  if samples > 0 then
    -- adaptive: remember the real output size for the next estimates.
    local key = tenantKey(spec, tenant, ':out:' .. useCase .. ':' .. model)
    redis.call('LPUSH', key, I(u.completion))
    redis.call('LTRIM', key, 0, samples - 1)
  end
  closed, eventType = 'settled', 'reservation.settled'
elseif op == 'expire' then
  -- Nobody knows how this call ended (its edge died mid-call). With `expB` (reserve's
  -- default) it is billed at its worst case, so the books never show less than the model may
  -- have billed; a settle that arrives later corrects it to the real usage.
  if expB == '1' then
    chargeT, chargeU = heldT, heldU
    billing = true
  end
  closed, eventType = 'expired', 'reservation.expired'
elseif state == 'expired' then
  -- A release after the expiry (it waited in the closes stream while the authority was away,
  -- and the lease ran out first): the edge knows the call billed nothing, as a release in time
  -- would have, so what the expiry billed at its worst case is given back.
  chargeT, chargeU = -expiredT, -expiredU
  billing = true
end

-- Every window once: give back the hold (when still held, and on the windows it was recorded
-- against), bill the charge, and keep what it says for the event.
local isHeld = state == 'held'
-- With room for 8 windows (see stateKeys); filled only when asPlanned.
local states = {nil, nil, nil, nil, nil, nil, nil, nil}
-- Windows charged otherwise than the event's own charge, by key (only windows added since
-- admission can be): their event states say what they were charged.
local chargedOtherwise
-- End-user windows added since admission (the tenant had no end-user budgets then), which no
-- admission kept: they are kept as admission keeps them, and the end user tracked.
local addedUser
-- The end user's windows, and whether any still has something billed, held or possible after
-- this close (an end user this call tracked and left with nothing is forgotten below).
local userKeys, userInUse
local budgets = spec.budgets
for i = 1, asPlanned and #budgets or #targets do
  local key, unit, b, held
  if asPlanned then
    b = budgets[i]
    key, unit, held = KEYS[b.key], b.unit, true
  else
    local t = targets[i]
    key, unit, b, held = t.key, t.unit, t.b, t.held
  end
  local usd = unit == 'usd'
  local bd = bounds(spec, b)
  local amount = billing and (usd and chargeU or chargeT) or 0
  if not held then
    -- A window of the current plan the record does not hold on (added since admission): it
    -- got neither the admission's charge nor an expiry's (the sweeper expires on the record's
    -- windows), so a settle bills it the whole usage, and nothing else touches it.
    local own = amount
    amount = op == 'settle' and (usd and costU or billedT) or 0
    if amount ~= own then
      chargedOtherwise = chargedOtherwise or {}
      chargedOtherwise[key] = amount
    end
    if b.scope == 'u' then
      addedUser = addedUser or {}
      addedUser[#addedUser + 1] = key
    end
  end
  local bucket = bucketField(bd[1])
  local s, h, p, billed, _, fresh = slide(key, bd[2], bd[3], bucket)
  if fresh then
    keepUserWindow(b, key, fresh)
  end
  local changed = false
  if isHeld and held then
    h = h - (usd and heldU or heldT)
    if h < 0 then
      h = 0
    end
    changed = true
    local dp = usd and potU or potT
    if dp ~= 0 then
      p = math.max(0, p - dp)
      redis.call('HSET', key, 'p', I(p))
    end
  end
  s = s + amount
  if b.scope == 'u' then
    userKeys = userKeys or {}
    userKeys[#userKeys + 1] = key
    userInUse = userInUse or s ~= 0 or h ~= 0 or p ~= 0
  end
  local sText, hText = I(s), I(h)
  if amount ~= 0 then
    redis.call('HSET', key, 's', sText, 'h', hText, bucket, I((billed and billed + 0 or 0) + amount))
  elseif changed then
    redis.call('HSET', key, 's', sText, 'h', hText)
  end
  if asPlanned then
    -- windowState's text, from the amounts just written (a plan's budget has head and tail).
    states[i] = b.head .. sText .. ',' .. hText .. b.tail
  end
end
if addedUser then
  -- Kept the longest window past the admission, as admit.lua keeps an end user's windows (and
  -- a rebuild, which tracks the end user from its reservation.created).
  local createdAt = f[4] + 0
  local ttl = I(math.max(1, createdAt + END_USER_KEEP_MS - now))
  for _, key in ipairs(addedUser) do
    redis.call('PEXPIRE', key, ttl)
  end
  if billedT > 0 or costU > 0 then
    local registry = tenantKey(spec, spec.tenant, ':users')
    local seen = redis.call('ZSCORE', registry, endUser)
    if not seen or seen + 0 < createdAt then
      redis.call('ZADD', registry, I(createdAt), endUser)
    end
    if not seen then
      -- Added: the registry's filter (admit.lua trackedFilter) no longer holds them all.
      redis.call('DEL', registry .. ':filter')
    end
  end
end
-- A settle's charge is most often its bill (nothing charged before): the same texts (formatting
-- a number costs as much as a command's argument).
local billedTText, costUText = I(billedT), I(costU)
local chargeTText = chargeT == billedT and billedTText or I(chargeT)
local chargeUText = chargeU == costU and costUText or I(chargeU)
if billing then
  for n = 1, #stateKeys do
    local stateKey = stateKeys[n]
    redis.call('HINCRBY', stateKey, 'billedT', chargeTText)
    redis.call('HINCRBY', stateKey, 'billedU', chargeUText)
  end
end
if isHeld then
  -- Leave the in-flight sets, the root level's (the org's lease index) among them. A hold an
  -- older authority admitted is also in the org's old lease index (`leases`): the sweeper
  -- drains that (keys.ts legacyLeases), not each close.
  for n = 1, #holdsKeys do
    local holdsKey = holdsKeys[n]
    redis.call('ZREM', holdsKey, resId)
  end
end

local nowText = I(now)
if op == 'expire' then
  redis.call('HSET', resKey, 'state', closed, 'closedAt', nowText, 'billedT', '0', 'billedU', '0',
    'expT', I(chargeT), 'expU', I(chargeU))
else
  redis.call('HSET', resKey, 'state', closed, 'closedAt', nowText, 'billedT', billedTText,
    'billedU', costUText)
end
redis.call('PEXPIRE', resKey, T(spec.keepMs))

local windows = asPlanned and table.concat(states, ';', 1, #budgets)
  or withRemoved(spec, windowStates(spec, chargedOtherwise), recorded)
if userKeys and not userInUse and tracked then
  -- This call tracked its end user (admit.lua's `nu`) and leaves it nothing billed, held or
  -- possible (the upstream failed it, the client hung up before any output): it is forgotten,
  -- as a refusal leaves a new end user, so calls that bill nothing fill no maxEndUsers. The
  -- filter of the registry (admit.lua trackedFilter) may still hold it: it is asked, not refused.
  -- After the event's window states, whose reading would write the windows again.
  redis.call('ZREM', tenantKey(spec, tenant, ':users'), endUser)
  if keyId ~= '' then
    redis.call('ZREM', keyKey(spec, tenant, keyId, ':users'), endUser)
  end
  redis.call('DEL', unpack(userKeys))
end
local head = '\0time\0' .. nowText .. '\0tenant\0' .. tenant .. '\0org\0' .. spec.org ..
  '\0reservationId\0' .. resId .. '\0keyId\0' .. keyId .. '\0useCase\0' .. useCase ..
  '\0model\0' .. model .. '\0mode\0' .. mode .. atDefault('api', api, 'chat')
local ending = '\0windows\0' .. windows .. (endUser ~= '' and ('\0endUser\0' .. endUser) or '')
local heldText = '\0heldTokens\0' .. f[2] .. '\0heldMicroUsd\0' .. f[3]
-- The requests the call's retries took of its upstream's capacity (kept there for their
-- minute): in its close's event, for a rebuild.
local retried = (f[8] and f[8] ~= '0') and ('\0retryRequests\0' .. f[8]) or ''
local body
if op == 'settle' then
  body = '\0promptTokens\0' .. ARGV[5] .. '\0completionTokens\0' .. ARGV[6] ..
    '\0cachedPromptTokens\0' .. I(usage.cached) .. atDefault('cacheWrite5mTokens', I(usage.w5), '0') ..
    atDefault('cacheWrite1hTokens', I(usage.w1h), '0') .. atDefault('reasoningTokens', ARGV[8], '0') ..
    atDefault('audioPromptTokens', I(usage.aIn), '0') ..
    atDefault('audioCompletionTokens', I(usage.aOut), '0') ..
    '\0serviceTier\0' .. billedTier .. (billedLong and '\0longContext\0' .. '1' or '') ..
    (toolUses and '\0toolUses\0' .. I(toolUses) .. '\0toolFeeMicroUsd\0' .. I(toolFee) or '') ..
    '\0billedTokens\0' .. billedTText .. '\0costMicroUsd\0' .. costUText ..
    '\0outcome\0' .. outcome .. '\0durationMs\0' .. elapsed(now, f[4]) .. retried
elseif op == 'release' then
  -- The reason, then the requests its upstream answered that the release keeps ('' none).
  local reason, answered = string.match(select(2, fields(12, 2)), '^([^\1]*)\1?(.*)$')
  body = '\0reason\0' .. reason .. '\0durationMs\0' .. elapsed(now, f[4]) .. retried ..
    (answered ~= '' and ('\0answeredRequests\0' .. answered) or '')
else
  body = '\0leaseMs\0' .. leaseMs
end
emitText('type\0' .. eventType .. '\0id\0' .. eventId .. head .. heldText ..
  '\0chargedTokens\0' .. chargeTText .. '\0chargedMicroUsd\0' .. chargeUText .. body .. ending)

if overT > 0 or overU > 0 then
  local leaf = tenantKey(spec, tenant, ':state')
  redis.call('HINCRBY', leaf, 'overN', 1)
  redis.call('HINCRBY', leaf, 'overT', I(overT))
  redis.call('HINCRBY', leaf, 'overU', I(overU))
  redis.call('HSET', leaf, 'overAt', nowText)
  emitText('type\0reservation.overrun\0id\0' .. fields(12, 2) .. head ..
    '\0heldTokens\0' .. I(heldT + prechargedT) .. '\0heldMicroUsd\0' .. I(heldU + prechargedU) ..
    '\0billedTokens\0' .. billedTText .. '\0costMicroUsd\0' .. costUText ..
    '\0overrunTokens\0' .. I(overT) .. '\0overrunMicroUsd\0' .. I(overU) .. ending)
end

if f[7] then
  -- A capacity.move is between its claim and its record: the hold's capacity is still on the
  -- upstream the move leaves, and what it may have taken of the fallback is given back (the
  -- move's record finds the hold closed and changes nothing: move.lua).
  return {closed, billedTText, costUText, windows, I(overT), I(overU),
    redis.call('HGET', resKey, 'mf') or '', f[6] or ''}
end
return {closed, billedTText, costUText, windows, I(overT), I(overU), f[6] or '-'}
