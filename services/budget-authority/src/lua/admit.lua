-- admit: checks every budget window of the tenant and its ancestors plus the in-flight caps,
-- and records the hold, in one atomic step.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the reservation hash
-- KEYS[3]  the org's lease index (zset: reservation id -> lease expiry), read by the sweeper:
--          the root level's in-flight set (that level's holds index is 3), so the levels'
--          ZADDs write it
-- KEYS[4]  the org's refusal summaries (hash), flushed by the sweeper
-- KEYS[n]  the levels' state hashes and holds sorted sets, the budgets' window hashes
--          (their indexes are in the spec)
-- ARGV     positional (admit.ts): now ('' = Redis TIME; a test clock's instant), resId,
--          keyId, mode, prompt, max, minOut, leaseMs, the hold's input and output prices
--          (pico-USD per token: the dearest input price and the output price, the audio
--          prices when the call sends or asks for audio and they are dearer), extensible,
--          endUser, usersKey, the record's fixed text (lib.lua's RECORD_FIXED), the
--          reservation.created event's fixed fields (NUL-joined), the tool fees held
--          (micro-USD: the bound on each provider-run tool's uses at its fee; '0' none), the
--          model's tool-use prices for the record's `tf` (admit.ts; '' none), dry ('1': an
--          uncounted admit, evaluated and never admitted: a refusal is recorded as any other,
--          else {'fits'} and nothing written; else '0' and the upstream whose capacity the
--          call took, '' none: the record's `up`, where move.lua finds the hold), keyUsersKey (the KEYS index of the end users
--          the call's key named, 0: its key has no maxEndUsers or the call no end user with
--          budgets);
--          what only a refusal reports: useCase, model, api, shadowEventId (a shadow
--          refusal's; one that refuses takes the reservation.created event's id, from its
--          fixed fields: createdId), refusalsPerSecond;
--          ARGV[25] what only adaptive mode reads, '\1'-joined (lib.lua's fields): samplesKey,
--          percentile, minSamples, sampleWindow ('' in another mode, whose KEYS name no samples
--          list);
--          ARGV[26] what only a new or adopted end user reads, '\1'-joined: maxEndUsers, the
--          key's maxEndUsers, '1' when an end_user_limit refusal carries the end users tracked
--          (the edge remembers them), the tenant's keys with a maxEndUsers (',k1,k2,'; '' none,
--          or the call has no end user with budgets: adoptOwn registers an adopted end user
--          in its key's);
--          then the plan (lib.lua's readPlan). An end user's windows and registries are kept
--          END_USER_KEEP_MS (lib.lua) past its last admission.
--
-- Returns {'ok', heldTokens, heldMicroUsd, maxTokens, shrunk, expiresAt, duplicate, windows,
--          coveredOutputTokens}
--      or {'fits'} (dry only)
--      or {'keys', ...} (an adoption walk's keys KEYS lacks: adoptionKeys; nothing adopted yet)
--      or {'no', code, budgetIndex, retryAfterSeconds (-1: never), neededTokens,
--          neededMicroUsd, windows, inFlight[, summaryKind, eventFieldsJson]} (the last two on
--          an enforced budget_exceeded, concurrency_limit and tenant_suspended: Refused
--          `summary`; on end_user_limit the scope instead: 'key' when the key's maxEndUsers
--          refused, else 'tenant', then the summary's two and the end users the tenant tracks,
--          a Bloom filter in hex ('' when not asked, the key refused or there are too many:
--          trackedFilter))

-- What admit's body calls, defined once when the library loads (a function defined in the
-- body would be a new closure, and its upvalues new objects, on every call). They read the
-- call's fields from ARGV (positions above).

-- The call's end user on an event, when the client named one (the field is absent otherwise).
local function withEndUser(fields, endUser)
  if endUser ~= '' then
    fields[#fields + 1] = 'endUser'
    fields[#fields + 1] = endUser
  end
  return fields
end

-- Takes away a new end user's windows, which reading them created (nothing was held in them).
local function forgetWindows(spec)
  for _, nb in ipairs(spec.budgets) do
    if nb.scope == 'u' then
      redis.call('DEL', KEYS[nb.key])
    end
  end
end

-- The reservation.created event's id, the third of its fixed fields (ARGV[15]: 'type',
-- 'reservation.created', 'id', <id>, ...): a refusal that refuses writes no created event, and
-- takes its id (one argument fewer on every admit).
local function createdId()
  return string.match(ARGV[15], '^[^%z]*%z[^%z]*%zid%z([^%z]*)')
end

-- `scope` names whose limit refused when no budget did (end_user_limit: 'key' or 'tenant';
-- concurrency_limit: 'adopting' when a walk not done refused, the summary kind's last field);
-- `tracked`, on end_user_limit, the end users the tenant tracks (trackedFilter).
local function refuse(spec, newUser, code, bi, retry, needT, needU, windows, inflight, shadow, scope, tracked)
  local now, b = spec.now, spec.budgets[bi]
  local resId, keyId, useCase, model, mode, api = ARGV[2], ARGV[3], ARGV[20], ARGV[21], ARGV[4], ARGV[22]
  local list = {
    'type', 'admission.refused', 'id', shadow and ARGV[23] or createdId(),
    'time', I(now), 'tenant', spec.tenant, 'org', spec.org,
    'reservationId', resId, 'keyId', keyId, 'useCase', useCase,
    'model', model, 'mode', mode, 'code', code,
    'promptTokens', I(tonumber(ARGV[5])), 'maxTokens', I(tonumber(ARGV[6])),
    'neededTokens', I(needT), 'neededMicroUsd', I(needU),
    'budget', b and b.id or '', 'level', b and b.tenant or '',
    'retryAfterSeconds', I(retry), 'shadow', shadow and '1' or '0', 'inFlight', I(inflight),
    'windows', windows,
  }
  -- At its default (chat) left out: every reader fills it.
  if api ~= 'chat' then
    list[#list + 1] = 'api'
    list[#list + 1] = api
  end
  if b and (b.scope == 'k' or b.scope == 'u') then
    list[#list + 1] = 'scope'
    list[#list + 1] = (b.scope == 'k') and 'key' or 'end_user'
  elseif scope == 'key' then
    list[#list + 1] = 'scope'
    list[#list + 1] = 'key'
  end
  withEndUser(list, ARGV[12])
  if newUser then
    -- Reading its windows for the reply created them: a refused new end user costs no memory.
    forgetWindows(spec)
  end
  local kind = table.concat({spec.tenant, code, b and b.id or '', b and b.tenant or '',
    useCase, model, keyId, shadow and '1' or '0', api, b and b.scope or scope or ''}, '|')
  if refusalWritten(KEYS[spec.levels[1].state], KEYS[4], now, N(ARGV[24]), kind, list) then
    emit(list)
  end
  if (code == 'budget_exceeded' or code == 'concurrency_limit' or code == 'tenant_suspended')
      and not shadow then
    -- Its summary key and fields: an edge that answers the same call again itself counts
    -- those refusals under them (refuse.lua with a count).
    return {'no', code, I(bi), I(retry), I(needT), I(needU), windows, I(inflight), kind,
      cjson.encode(list)}
  end
  if code == 'end_user_limit' then
    -- With the end users tracked: an edge answers a call naming none of them itself.
    return {'no', code, I(bi), I(retry), I(needT), I(needU), windows, I(inflight), scope, kind,
      cjson.encode(list), tracked or ''}
  end
  return {'no', code, I(bi), I(retry), I(needT), I(needU), windows, I(inflight), scope}
end

-- A full registry's end users as a Bloom filter (end-user-filter.ts is its other half, with
-- the hash): FILTER_BITS bits an end user, FILTER_K hashes, for at most FILTER_MAX end users.
-- A filter is at least FILTER_LEAST bytes: a smaller one's double hashing repeats positions.
local FILTER_K, FILTER_BITS, FILTER_MAX, FILTER_LEAST, FILTER_KEEP_MS = 4, 16, 16384, 64, 10000
local SPLIT = 67108864
-- Each byte's two hex digits, made on the first filter built (the library's load sees no
-- `string`).
local HEX

-- The end users a full registry tracks (every end user whose call the tenant's cap does not
-- refuse), as a Bloom filter in hex: '' when there are more than FILTER_MAX. Built once and
-- kept beside the registry (`<registry>:filter`) until an end user is added to it (forgotten
-- then: forgetFilter) or FILTER_KEEP_MS: building it reads every id (~2 us each here), a
-- cached one is a GET. End users the registry forgot since are still in it: they are asked
-- of the authority, never refused by an edge.
local function trackedFilter(registry)
  local cached = redis.call('GET', registry .. ':filter')
  if cached then
    return cached
  end
  if redis.call('ZCARD', registry) > FILTER_MAX then
    return ''
  end
  local ids = redis.call('ZRANGE', registry, 0, -1)
  local n = #ids
  local bytes, set = math.max(FILTER_LEAST, math.ceil(n * FILTER_BITS / 8)), {}
  local m = bytes * 8
  for i = 1, bytes do
    set[i] = 0
  end
  local bor, lshift, rshift, band, sha, sub = bit.bor, bit.lshift, bit.rshift, bit.band,
    redis.sha1hex, string.sub
  for j = 1, n do
    local v = tonumber(sub(sha(ids[j]), 1, 13), 16)
    local h1 = v % SPLIT
    local h2 = (v - h1) / SPLIT
    for i = 0, FILTER_K - 1 do
      local p = (h1 + i * h2) % m
      local at = rshift(p, 3) + 1
      set[at] = bor(set[at], lshift(1, band(p, 7)))
    end
  end
  if not HEX then
    HEX = {}
    for i = 0, 255 do
      HEX[i] = string.format('%02x', i)
    end
  end
  for i = 1, bytes do
    set[i] = HEX[set[i]]
  end
  local text = table.concat(set)
  redis.call('SET', registry .. ':filter', text, 'PX', FILTER_KEEP_MS)
  return text
end

-- An end user was added to the registry: its filter no longer holds them all.
local function forgetFilter(registry)
  redis.call('DEL', registry .. ':filter')
end

-- Seconds until enough billed usage leaves window `b` to free `deficit`, assuming held
-- amounts settle first (they are calls in flight). -1: waiting cannot help.
local function retryAfter(spec, b, s, h, need, deficit)
  local now = spec.now
  if need > b.limit then
    return -1
  end
  if deficit <= h then
    return 1
  end
  local bd = bounds(spec, b)
  if b.window == 'month' and b.calendar then
    return math.ceil((nextMonthMs(now) - now) / 1000)
  end
  local target = deficit - h
  local raw = redis.call('HGETALL', KEYS[b.key])
  local buckets = {}
  for i = 1, #raw, 2 do
    local f = raw[i]
    if string.sub(f, 1, 1) == 'b' then
      buckets[#buckets + 1] = {tonumber(string.sub(f, 2)), tonumber(raw[i + 1])}
    end
  end
  table.sort(buckets, function(x, y) return x[1] < y[1] end)
  local freed = 0
  for _, bk in ipairs(buckets) do
    freed = freed + bk[2]
    if freed >= target then
      local leavesAt = (bk[1] + bd[3]) * bd[4]
      return math.max(1, math.ceil((leavesAt - now) / 1000))
    end
  end
  return 1
end

-- A call's tokens and micro-USD with `outputTokens` of output, at its hold's prices, with the
-- tool fees it may run up (ARGV[16]: held in micro-USD, never in tokens).
local function amounts(prompt, price, outputTokens)
  return prompt + outputTokens, cost(prompt, 0, outputTokens, price) + ARGV[16]
end

-- Checks every budget for a max_tokens; returns the first enforced budget that does not fit
-- (and its deficit), the first shadow budget that does not fit, and the call's amounts it
-- checked: needT, needU (its hold, output `covered` at most) and worstT, worstU (`maxTokens`).
local function check(spec, mode, extensible, sums, helds, pots, prompt, price, promptU, covered, maxTokens)
  local promptT = prompt
  local needT, needU = amounts(prompt, price, covered < maxTokens and covered or maxTokens)
  local worstT, worstU = amounts(prompt, price, maxTokens)
  local refusedAt, deficit, shadowAt = nil, 0, nil
  for i = 1, #spec.budgets do
    local b = spec.budgets[i]
    local need = (b.unit == 'usd') and needU or needT
    local worst = (b.unit == 'usd') and worstU or worstT
    local promptNeed = (b.unit == 'usd') and promptU or promptT
    local s, h, d = sums[i], helds[i], 0
    if mode == 'reserve' then
      -- What adaptive calls whose hold cannot grow may still overrun (`p`: admitted before the
      -- tenant left adaptive) counts in full: reserve has no debt.
      d = s + h + pots[i] + need - b.limit
    elseif mode == 'adaptive' then
      d = s + h + need - b.limit
      -- Every overrun still possible must fit in the debt bound, beside this call's worst
      -- case when its hold cannot grow, or its hold when it can (a hold taking the room those
      -- overruns may use would take the window past the bound when they happen).
      local d2 = s + h + pots[i] + (extensible and need or worst) - b.limit - b.debt
      if d2 > d then
        d = d2
      end
    elseif mode == 'estimate' then
      d = s + promptNeed - b.limit
    elseif mode == 'post' then
      d = s - b.limit + 1
    end
    if d > 0 then
      if b.enforce and refusedAt == nil then
        refusedAt, deficit = i, d
      elseif not b.enforce and shadowAt == nil then
        shadowAt = i
      end
    end
  end
  return refusedAt, deficit, shadowAt, needT, needU, worstT, worstU
end

-- The leaf's calls in flight (`known` when already counted).
local function leafInFlight(spec, known)
  return known or redis.call('ZCARD', KEYS[spec.levels[1].holds])
end

-- Whether a registry of end users (zset by last seen) is full at `max`: end users not seen
-- for longer than the longest window are forgotten first.
local function full(registry, max, now)
  if redis.call('ZCARD', registry) < max then
    return false
  end
  redis.call('ZREMRANGEBYSCORE', registry, '-inf', I(now - END_USER_KEEP_MS))
  return redis.call('ZCARD', registry) >= max
end

-- Each budget's window and unit as a record's holds text names them ("mt", after the level),
-- in the budgets' order: the plan's holds text is one code a budget (script-args.ts holdCode,
-- the one place that writes them).
local function windowCodes(spec)
  local out = {}
  for code in string.gmatch(spec.holdsText, '[^;]+') do
    out[#out + 1] = string.sub(code, -2)
  end
  return out
end

-- The windows of a level's own budgets (its tenant's, not a key's or end user's), as its
-- state hash's `ad` keeps the last plan it adopted (kept on the plan's level: one content);
-- the leaf's after its levels ("team;dept2;acme|Mt,mt").
local function levelMark(spec, lv)
  local mark = lv.mark
  if mark == nil then
    local codes, all = {}, windowCodes(spec)
    for i, b in ipairs(spec.budgets) do
      if b.tenant == lv.tenant and b.scope ~= 'k' and b.scope ~= 'u' then
        codes[#codes + 1] = all[i]
      end
    end
    mark = table.concat(codes, ',')
    if lv == spec.levels[1] then
      -- The leaf's: its chain too (adopt's levels a team moved under).
      mark = spec.levelsText .. '|' .. mark
    end
    lv.mark = mark
  end
  return mark
end

-- A level's state hash's `suspended` when the level is not suspended and has nothing to adopt
-- for a call of this mode: '0' (what a resume writes, and what old data holds) followed by
-- its mark (levelMark) and, on the leaf in a holding mode, '+h' (its calls in flight adopted
-- for holding: `am`). An admission that reads it so reads nothing else of the level's state;
-- any other value (a suspension's '1', a resume's '0', another plan or mode) sends it to read
-- `ad` and `am` as well, and write this again once they say the same. A suspension by any
-- version writes '1' over it, and every reader of `suspended` tests it against '1'.
local function clearMark(spec, lv, holdingLeaf)
  local key = holdingLeaf and 'clearH' or 'clear'
  local text = lv[key]
  if text == nil then
    text = '0' .. levelMark(spec, lv) .. (holdingLeaf and '+h' or '')
    lv[key] = text
  end
  return text
end

-- Writes a reservation record's holds text: `listed` (';' around, as `named` left it) and
-- `added` (codes) after it; the 17th field of its fixed text `r`, or its own field on a
-- record without one.
local function addHolds(key, r, listed, added)
  local holds, text = string.sub(listed, 2, -2), table.concat(added, ';')
  holds = holds == '' and text or text == '' and holds or (holds .. ';' .. text)
  if r then
    local parts = {}
    for part in string.gmatch(r .. '\1', '([^\1]*)\1') do
      parts[#parts + 1] = part
    end
    parts[17] = holds
    redis.call('HSET', key, 'r', table.concat(parts, '\1'))
  else
    redis.call('HSET', key, 'holds', holds)
  end
end

-- A record's holds (`listed`: ';'-joined, ';' around) naming the window of `code` so, when
-- they hold there; nil when not. A month budget switched between sliding (M) and calendar
-- (C) keeps its window (`month-<unit>`, recordHolds): its other code is renamed, as a
-- rebuild names it from the config, not held a second time.
local function named(listed, code)
  if string.find(listed, ';' .. code .. ';', 1, true) then
    return listed
  end
  local w = string.sub(code, -2, -2)
  if w ~= 'M' and w ~= 'C' then
    return nil
  end
  local twin = string.sub(code, 1, -3) .. (w == 'M' and 'C' or 'M') .. string.sub(code, -1)
  local i = string.find(listed, ';' .. twin .. ';', 1, true)
  return i and (string.sub(listed, 1, i) .. code .. string.sub(listed, i + #twin + 1))
end

-- The codes (`at`: the level's index in the record, or '@<tenant>') of level `tenant`'s budgets
-- a record's holds (`listed`: ';'-joined, ';' around) lack, added to `added`, and their
-- windows to `targets`. Returns `listed` as `named` leaves it.
local function lacking(spec, tenant, at, listed, added, targets)
  local codes = windowCodes(spec)
  for bi, b in ipairs(spec.budgets) do
    if b.tenant == tenant and b.scope ~= 'k' and b.scope ~= 'u' then
      local code = at .. codes[bi]
      local renamed = named(listed, code)
      if renamed then
        listed = renamed
      else
        added[#added + 1] = code
        targets[#targets + 1] = {KEYS[b.key], b.unit}
      end
    end
  end
  return listed
end

-- The most records one admission walks to adopt calls in flight (each costs Redis ~20 µs,
-- and Redis runs one script at a time: 100,000 in one walk stalled every tenant of that
-- Redis ~2 s; bench/adopt.bench.ts).
local ADOPT_STEP = 1000

-- The calls in flight (ids) of in-flight set `holdsKey` a walk adopts in this admission, and
-- whether the walk is done: the whole set when it has at most ADOPT_STEP, else ADOPT_STEP at
-- a time from a copy of it (`pendingKey`) taken when the walk starts. Field `field` of
-- `stateKey` names the walk under way by the mark it adopts into (`target`): a walk for
-- another mark (the plan changed again) starts over. Calls admitted since the copy hold on
-- the new plan already; those closed since are skipped (not held).
local function walkStep(stateKey, field, target, holdsKey, pendingKey)
  local under = redis.call('HGET', stateKey, field)
  if under ~= target then
    if under then
      redis.call('DEL', pendingKey)
    end
    if redis.call('ZCARD', holdsKey) <= ADOPT_STEP then
      if under then
        redis.call('HDEL', stateKey, field)
      end
      return redis.call('ZRANGE', holdsKey, 0, -1), true
    end
    redis.call('COPY', holdsKey, pendingKey, 'REPLACE')
    redis.call('HSET', stateKey, field, target)
  end
  local ids = redis.call('ZRANGE', pendingKey, 0, ADOPT_STEP - 1)
  redis.call('ZREMRANGEBYRANK', pendingKey, 0, ADOPT_STEP - 1)
  if redis.call('EXISTS', pendingKey) == 1 then
    return ids, false
  end
  redis.call('HDEL', stateKey, field)
  return ids, true
end

-- Adopts the calls in flight at level `li` into the plan (SPEC §4: a window's admissions see
-- every call that will bill it): each hold record in the level's holds set that is not on a
-- window of the level's budgets (added, or its unit or window kind changed, since it was
-- admitted) is held there too, its hold's amount, and the window added to its holds text, so
-- its close gives it back there as on the others. With `all` (the tenant switched to reserve
-- or adaptive), a call admitted in post or estimate mode, which holds nothing, is held at its
-- worst case on every window it is recorded on. Runs on the first admission after the plan
-- changed (the state hash's `ad`, `am`), over `ids` (walkStep's: ADOPT_STEP records at most).
local function adopt(spec, li, all, ids)
  local lv = spec.levels[li]
  local prefix = spec.kp .. ':{' .. spec.org .. '}:r:'
  for _, id in ipairs(ids) do
    local key = prefix .. id
    local v = redis.call('HMGET', key, 'state', 'heldT', 'heldU', 'r', 'max', 'chargedU', 'expiresAt',
      'tfH')
    if v[1] == 'held' then
      local x = recordFixed(key, v[4])
      local holds, levels = x[17] or '', recordLevels(x[16])
      local heldT, heldU = tonumber(v[2]) or 0, tonumber(v[3]) or 0
      local targets = {}
      local grown = all and heldT == 0 and heldU == 0 and (x[6] == 'post' or x[6] == 'estimate')
      if grown then
        -- Its worst case still to bill: post billed nothing yet, estimate the prompt; and
        -- the tool fees it may run up.
        local prompt, max = tonumber(x[8]), tonumber(v[5])
        local whole = cost(prompt, 0, max, {N(x[9]), N(x[23]) or N(x[10]), 0}) + (tonumber(v[8]) or 0)
        if x[6] == 'post' then
          heldT, heldU = prompt + max, whole
        else
          heldT, heldU = max, math.max(0, whole - (tonumber(v[6]) or 0))
        end
        local rec = {tenant = x[1], keyId = x[3] or '', endUser = x[20] or ''}
        for _, r in ipairs(recordHolds(spec, levels, holds, rec)) do
          targets[#targets + 1] = {r[1], r[2]}
        end
      end
      local index = {}
      for n, t in ipairs(levels) do
        index[t] = I(n - 1)
      end
      local added, listed = {}, ';' .. holds .. ';'
      -- A call in this level's set whose record lacks the level: its team moved under it
      -- ('@<tenant>' codes, which name the level itself).
      local was = listed
      listed = lacking(spec, lv.tenant, index[lv.tenant] or ('@' .. lv.tenant), listed, added, targets)
      if li == 1 and x[16] ~= spec.levelsText then
        -- The leaf's walk after its chain changed: the levels its team moved under hold the
        -- call too, and count it in flight (their sets: a later change of their budgets walks
        -- it; its close leaves them).
        for n = 2, #spec.levels do
          local up = spec.levels[n]
          if not index[up.tenant] then
            listed = lacking(spec, up.tenant, '@' .. up.tenant, listed, added, targets)
            redis.call('ZADD', KEYS[up.holds], 'NX', v[7] or I(spec.now), id)
          end
        end
      end
      for _, t in ipairs(targets) do
        hold(t[1], t[2] == 'usd' and heldU or heldT)
      end
      if grown then
        redis.call('HSET', key, 'heldT', I(heldT), 'heldU', I(heldU))
      end
      if #added > 0 or listed ~= was then
        addHolds(key, v[4], listed, added)
      end
    end
  end
end

-- The holds' codes of the call's key's budgets and of its end user's ("KMt;Kmt", "UMt"), as
-- the leaf's state hash keeps the last it adopted (`ak:<key id>`, `au`: one for all the
-- tenant's end users, who have the same budgets); '' when none. The plan lists the key's
-- first, and U is no window's or unit's letter.
local function ownMarks(spec)
  local own = spec.own
  if not own then
    return '', ''
  end
  local at = string.find(own, 'U', 1, true)
  if not at then
    return own, ''
  end
  return string.sub(own, 1, math.max(0, at - 2)), string.sub(own, at)
end

-- Adopts into the plan's budgets of `scope` ('k': the call's key's, 'u': its tenant's end
-- users') the calls in flight of that key, or of every end user of the tenant, as adopt does
-- a level's: each one's hold's amount held on the windows of those budgets its record lacks
-- (another end user's windows named from its record as recordHolds names them, kept as long
-- as admission keeps an end user's), and the codes added to its record's holds. An end user
-- so adopted is one with budgets: in the tenant's registry (KEYS[usersKey]) as seen when its
-- call was admitted, as a rebuild registers it (so neither counts it new, whose windows a
-- refusal takes away), and in its call's key's when that key has a maxEndUsers (the
-- tenant's keys with one, ARGV[26]'s 4th, list them: it counts there at once, not at its next admission, which no key check sees:
-- it is no new end user of the tenant any more). A key and an
-- end user belong to one tenant: the walk is the leaf's in-flight set (at most its
-- maxInFlight records), those of the tenant's own calls (a tenant with teams under it holds
-- theirs there too). True when the call's own end user had calls in flight adopted (its
-- windows now hold them: not a new end user's, which a refusal takes away).
local function adoptOwn(spec, scope, ids)
  local prefix = spec.kp .. ':{' .. spec.org .. '}:r:'
  local keyId, endUser, letter = ARGV[3], ARGV[12], scope == 'k' and 'K' or 'U'
  local codes, mine = windowCodes(spec), false
  local cappedKeys = select(4, fields(26, 4))
  for _, id in ipairs(ids) do
    local key = prefix .. id
    local v = redis.call('HMGET', key, 'state', 'heldT', 'heldU', 'r', 'createdAt')
    if v[1] == 'held' then
      local x = recordFixed(key, v[4])
      local rec = {tenant = x[1], keyId = x[3] or '', endUser = x[20] or ''}
      local subject = scope == 'k' and rec.keyId or rec.endUser
      if rec.tenant == spec.tenant and subject ~= '' and (scope == 'u' or subject == keyId) then
        local holds = x[17] or ''
        local listed = ';' .. holds .. ';'
        local heldT, heldU = tonumber(v[2]) or 0, tonumber(v[3]) or 0
        local added, was = {}, listed
        for bi, b in ipairs(spec.budgets) do
          local code = letter .. codes[bi]
          local renamed = b.scope == scope and named(listed, code)
          if renamed then
            listed = renamed
          elseif b.scope == scope then
            added[#added + 1] = code
            local window = KEYS[b.key]
            if scope == 'u' and subject ~= endUser then
              window = recordHolds(spec, {}, code, rec)[1][1]
            end
            hold(window, b.unit == 'usd' and heldU or heldT)
            if scope == 'u' then
              redis.call('PEXPIRE', window, END_USER_KEEP_TEXT)
            end
          end
        end
        if #added > 0 or listed ~= was then
          addHolds(key, v[4], listed, added)
          if #added > 0 and scope == 'u' then
            local seen = v[5] or I(spec.now)
            if redis.call('ZADD', KEYS[N(ARGV[13])], 'GT', seen, subject) == 1 then
              forgetFilter(KEYS[N(ARGV[13])])
            end
            if rec.keyId ~= '' and string.find(cappedKeys, ',' .. rec.keyId .. ',', 1, true) then
              local registry = keyKey(spec, spec.tenant, rec.keyId, ':users')
              redis.call('ZADD', registry, 'GT', seen, subject)
              redis.call('PEXPIRE', registry, END_USER_KEEP_TEXT)
            end
            mine = mine or subject == endUser
          end
        end
      end
    end
  end
  return mine
end

-- The ids walkStep takes next (a walk under way: from its copy, none while the copy is not
-- declared), read without changing anything; the copy's key added to `wants` when the step
-- may touch it (`more`: ids the walk's set may get first, from the leaf's walk).
local function stepIds(stateKey, field, target, holdsKey, pendingKey, more, wants)
  local under = redis.call('HGET', stateKey, field)
  if under == target then
    -- A walk under way: its next ids are its copy's.
    wants[#wants + 1] = pendingKey
    if not wants.declared[pendingKey] then
      return {}
    end
    return redis.call('ZRANGE', pendingKey, 0, ADOPT_STEP - 1)
  end
  if under then
    wants[#wants + 1] = pendingKey
  end
  if redis.call('ZCARD', holdsKey) + more > ADOPT_STEP then
    wants[#wants + 1] = pendingKey
  end
  return redis.call('ZRANGE', holdsKey, 0, ADOPT_STEP - 1)
end

-- Asks for a record's key (wants); with `read`, its fixed fields and its HMGET (state, heldT,
-- heldU) when it is declared and held, else nil. A walk that only adds the plan's windows to
-- its records needs no read: the plan's windows are declared.
local function wantRecord(prefix, id, wants, read)
  local key = prefix .. id
  wants[#wants + 1] = key
  if not read or not wants.declared[key] then
    return nil
  end
  local v = redis.call('HMGET', key, 'state', 'heldT', 'heldU', 'r')
  if v[1] ~= 'held' then
    return nil
  end
  return recordFixed(key, v[4]), v
end

-- The keys an admission's adoption walks (walkStep, adopt, adoptOwn) will touch besides the
-- plan's, found before the walks change anything: the walks' copies of an in-flight set
-- (`pending`), the records of the calls they adopt, and the windows those records name
-- beyond the plan's (a post or estimate call grown to its worst case on every window it is
-- recorded on; another end user's windows; its key's registry). Returns {'keys', ...} (the
-- ones KEYS lacks: admit.ts runs the admission again with them added, scripts.ts
-- withDeclared), or nil when KEYS has them all. A key it can name only once a declared one
-- is read (the calls a walk under way has left in its copy, their records' windows) is
-- asked for by the next run: at most three askings (the copy, the records, their windows).
-- It may name more than the walks touch (a walk it cannot tell is done), never fewer.
local function adoptionKeys(spec, adopting, ownK, ownU)
  local wants = {declared = {}}
  for i = 1, #KEYS do
    wants.declared[KEYS[i]] = true
  end
  local prefix = spec.kp .. ':{' .. spec.org .. '}:r:'
  local leaf, leafHolds = KEYS[spec.levels[1].state], KEYS[spec.levels[1].holds]
  local leafIds = 0
  for _, a in ipairs(adopting) do
    local lv = spec.levels[a[1]]
    -- A level above the leaf may have the leaf's calls added to its set first (adopt).
    local ids = stepIds(KEYS[lv.state], 'ap', levelMark(spec, lv) .. (a[2] and '+' or ''),
      KEYS[lv.holds], tenantKey(spec, lv.tenant, ':adopting'), a[1] == 1 and 0 or leafIds, wants)
    if a[1] == 1 then
      leafIds = #ids
    end
    for _, id in ipairs(ids) do
      local x, v = wantRecord(prefix, id, wants, a[2])
      if x and a[2] and (tonumber(v[2]) or 0) == 0 and (tonumber(v[3]) or 0) == 0
          and (x[6] == 'post' or x[6] == 'estimate') then
        -- Grown to its worst case on every window it is recorded on.
        local rec = {tenant = x[1], keyId = x[3] or '', endUser = x[20] or ''}
        for _, r in ipairs(recordHolds(spec, recordLevels(x[16]), x[17] or '', rec)) do
          wants[#wants + 1] = r[1]
        end
      end
    end
  end
  -- The key's and end users' walks (run only when the levels' are done: named whether or not).
  if ownK and ownK ~= '' then
    local keyId = ARGV[3]
    for _, id in ipairs(stepIds(leaf, 'apk:' .. keyId, ownK, leafHolds,
        tenantKey(spec, spec.tenant, ':adopting:k:' .. keyId), 0, wants)) do
      wantRecord(prefix, id, wants, false)
    end
  end
  if ownU and ownU ~= '' then
    local endUser, cappedKeys = ARGV[12], select(4, fields(26, 4))
    local codes = windowCodes(spec)
    for _, id in ipairs(stepIds(leaf, 'apu', ownU, leafHolds,
        tenantKey(spec, spec.tenant, ':adopting:u'), 0, wants)) do
      local x = wantRecord(prefix, id, wants, true)
      local rec = x and {tenant = x[1], keyId = x[3] or '', endUser = x[20] or ''}
      if rec and rec.tenant == spec.tenant and rec.endUser ~= '' then
        if rec.endUser ~= endUser then
          for bi, b in ipairs(spec.budgets) do
            if b.scope == 'u' then
              wants[#wants + 1] = recordHolds(spec, {}, 'U' .. codes[bi], rec)[1][1]
            end
          end
        end
        if rec.keyId ~= '' and string.find(cappedKeys, ',' .. rec.keyId .. ',', 1, true) then
          wants[#wants + 1] = keyKey(spec, spec.tenant, rec.keyId, ':users')
        end
      end
    end
  end
  local out, asked = nil, {}
  for _, key in ipairs(wants) do
    if not wants.declared[key] and not asked[key] then
      asked[key] = true
      out = out or {'keys'}
      out[#out + 1] = key
    end
  end
  return out
end

-- @call
local spec = readPlan(27)
spec.now = tonumber(ARGV[1])
-- The call's fields are locals, not fields of `spec` (each new field of a table is a rehash).
-- (The fields only a refusal reports are read there.)
local resId, mode = ARGV[2], ARGV[4]
local prompt, maxAsked, minOut = ARGV[5] + 0, ARGV[6] + 0, N(ARGV[7])
local leaseMs = N(ARGV[8])
-- Holds cost the call's input at the first price and the output at the second, and no cache
-- reads or writes: the other prices are the record's (its fixed text), for the settle.
local price = {N(ARGV[9]), N(ARGV[10]), 0}
local extensible = ARGV[11] == '1'
local toolFee = ARGV[16] + 0
local endUser, usersKey = ARGV[12], N(ARGV[13])
local keyUsersKey = N(ARGV[19])
spec.now = clockNow(spec)
local now = spec.now
local resKey = KEYS[2]

-- A retried admit with the same id answers what the first one decided (its state first: a
-- new id, the usual case, reads one field).
local priorState = redis.call('HGET', resKey, 'state')
if priorState then
  local prior = redis.call('HMGET', resKey, 'state', 'heldT', 'heldU', 'max', 'expiresAt', 'cov')
  if prior[1] == 'held' then
    return {'ok', prior[2], prior[3], prior[4], '0', prior[5], '1', windowStates(spec), prior[6]}
  end
  return {'no', 'reservation_closed', '0', '-1', '0', '0', windowStates(spec), '0'}
end

-- An end user with budgets not seen before (or forgotten): a refusal leaves no window of it.
local newUser = usersKey > 0 and not redis.call('ZSCORE', KEYS[usersKey], endUser)



-- A new end user gets budgets only while the tenant has room for one more (maxEndUsers), and
-- its key too when the key has a maxEndUsers of its own (so no key takes the tenant's all).
if newUser then
  local maxEndUsers, keyMaxEndUsers, remember = fields(26, 4)
  if full(KEYS[usersKey], tonumber(maxEndUsers), now) then
    -- The end users tracked go to an edge that remembers them only once the calls in flight
    -- are adopted into the end users' budgets as they are now (the leaf's `au`): until then an
    -- end user with a call in flight may be missing from the registry, which its adoption (or
    -- its settle) adds, and the edge would refuse it.
    local tracked = ''
    if remember == '1' then
      local _, u = ownMarks(spec)
      if (redis.call('HGET', KEYS[spec.levels[1].state], 'au') or '') == u then
        tracked = trackedFilter(KEYS[usersKey])
      end
    end
    return refuse(spec, newUser, 'end_user_limit', 0, -1, 0, 0, windowStates(spec), 0, false, 'tenant',
      tracked)
  end
  if keyUsersKey > 0 and full(KEYS[keyUsersKey], tonumber(keyMaxEndUsers), now) then
    return refuse(spec, newUser, 'end_user_limit', 0, -1, 0, 0, windowStates(spec), 0, false, 'key')
  end
end

-- Suspension and in-flight caps, every level. A level found clear (not suspended, nothing to
-- adopt for this mode) keeps that in its `suspended` (clearMark): one field read a level. The leaf's in flight is reported on refusals
-- only, so it is counted then (nothing changed before a refusal).
local inflight = nil
-- The levels whose calls in flight are to be adopted into the plan (adopt): their budgets'
-- windows changed since their state's `ad`, or (the leaf, `am`) the tenant switched to
-- holding modes since it admitted in post or estimate.
-- The call's key's and end users' budgets the same (`ak:<key id>`, `au` on the leaf: ownK,
-- ownU the marks to write), read only for a call by a key or for an end user.
local holding = mode == 'reserve' or mode == 'adaptive'
local adopting, ownK, ownU = nil, nil, nil
local keyId = ARGV[3]
for i = 1, #spec.levels do
  local lv = spec.levels[i]
  local key = KEYS[lv.state]
  local clear = clearMark(spec, lv, i == 1 and holding)
  local seen
  if i == 1 and (keyId ~= '' or endUser ~= '') then
    local st = redis.call('HMGET', key, 'suspended', 'ak:' .. keyId, 'au')
    seen = st[1]
    local k, u = ownMarks(spec)
    if keyId ~= '' and (st[2] or '') ~= k then
      ownK, adopting = k, adopting or {}
    end
    if endUser ~= '' and (st[3] or '') ~= u then
      ownU, adopting = u, adopting or {}
    end
  else
    seen = redis.call('HGET', key, 'suspended')
  end
  if seen ~= clear then
    -- Suspended, or something changed since this level's state was last found clear: read
    -- what it stands for.
    if seen == '1' then
      return refuse(spec, newUser, 'tenant_suspended', 0, -1, 0, 0, windowStates(spec), 0, false)
    end
    local st = redis.call('HMGET', key, 'ad', 'am')
    local mark = levelMark(spec, lv)
    local all = i == 1 and holding and st[2] ~= 'h'
    if (st[1] or '') ~= mark or all then
      adopting = adopting or {}
      adopting[#adopting + 1] = {i, all}
    end
    if i == 1 and not holding and st[2] == 'h' then
      redis.call('HSET', key, 'am', 'n')
    end
    if (st[1] or '') == mark and not all then
      redis.call('HSET', key, 'suspended', clear)
    end
  end
  if lv.maxInFlight > 0 then
    local n = redis.call('ZCARD', KEYS[lv.holds])
    if i == 1 then
      inflight = n
    end
    if n >= lv.maxInFlight then
      return refuse(spec, newUser, 'concurrency_limit', 0, 1, 0, 0, windowStates(spec), n, false)
    end
  end
end

if adopting then
  -- Every key the walks touch is declared before any of them changes anything.
  local missing = adoptionKeys(spec, adopting, ownK, ownU)
  if missing then
    return missing
  end
  -- Each walk a step (walkStep); a walk not done refuses the call (concurrency_limit, retry in
  -- 1 s: the windows do not see all the calls in flight yet), and the next admission goes on.
  local unfinished = false
  for _, a in ipairs(adopting) do
    local lv = spec.levels[a[1]]
    local mark = levelMark(spec, lv)
    local ids, done = walkStep(KEYS[lv.state], 'ap', mark .. (a[2] and '+' or ''), KEYS[lv.holds],
      tenantKey(spec, lv.tenant, ':adopting'))
    adopt(spec, a[1], a[2], ids)
    if done then
      -- Adopted: the level's state is clear (it was found not suspended above).
      redis.call('HSET', KEYS[lv.state], 'ad', mark, 'suspended',
        clearMark(spec, lv, a[1] == 1 and holding))
      if a[2] then
        redis.call('HSET', KEYS[lv.state], 'am', 'h')
      end
    else
      unfinished = true
    end
  end
  -- After the levels': a call grown to its worst case above is held so on these too.
  local leaf, leafHolds = KEYS[spec.levels[1].state], KEYS[spec.levels[1].holds]
  if ownK and not unfinished then
    local done = true
    if ownK ~= '' then
      local ids
      ids, done = walkStep(leaf, 'apk:' .. keyId, ownK, leafHolds,
        tenantKey(spec, spec.tenant, ':adopting:k:' .. keyId))
      adoptOwn(spec, 'k', ids)
    end
    if done then
      redis.call('HSET', leaf, 'ak:' .. keyId, ownK)
    else
      unfinished = true
    end
  end
  if ownU and not unfinished then
    local done = true
    if ownU ~= '' then
      local ids
      ids, done = walkStep(leaf, 'apu', ownU, leafHolds, tenantKey(spec, spec.tenant, ':adopting:u'))
      if adoptOwn(spec, 'u', ids) then
        newUser = false
      end
    end
    if done then
      redis.call('HSET', leaf, 'au', ownU)
    else
      unfinished = true
    end
  end
  if unfinished then
    return refuse(spec, newUser, 'concurrency_limit', 0, 1, 0, 0, windowStates(spec),
      leafInFlight(spec, inflight), false, 'adopting')
  end
end

-- Slide every window once; keep sums, holds and potential overruns for the checks. The tables
-- are made with room for 8 budgets (eight nils: filling an empty table resizes it at 1, 2 and
-- 4 entries; more than 8 grow as usual).
local sums = {nil, nil, nil, nil, nil, nil, nil, nil}
local helds = {nil, nil, nil, nil, nil, nil, nil, nil}
local pots = {nil, nil, nil, nil, nil, nil, nil, nil}
local sumTexts = {nil, nil, nil, nil, nil, nil, nil, nil}
for i = 1, #spec.budgets do
  local b = spec.budgets[i]
  local bd = bounds(spec, b)
  local s, h, p, _, sText, fresh = slide(KEYS[b.key], bd[2], bd[3])
  if fresh then
    keepUserWindow(b, KEYS[b.key], fresh)
  end
  sums[i], helds[i], pots[i], sumTexts[i] = s, h, p, sText
end

local promptT, promptU = prompt, cost(prompt, 0, 0, price)

-- adaptive: the hold covers a recent percentile of real output, not max_tokens.
local covered = maxAsked
if mode == 'adaptive' then
  local samplesKey, percentile, minSamples, sampleWindow = fields(25, 4)
  local recent = redis.call('LRANGE', KEYS[tonumber(samplesKey)], 0, tonumber(sampleWindow) - 1)
  if #recent >= tonumber(minSamples) then
    local xs = {}
    for i, v in ipairs(recent) do
      xs[i] = tonumber(v)
    end
    table.sort(xs)
    covered = math.min(maxAsked, math.max(1, xs[math.max(1, math.ceil(#xs * tonumber(percentile)))]))
  end
end


local maxTokens, shrunk = maxAsked, false
local refusedAt, deficit, shadowAt, needT, needU, worstT, worstU = check(spec, mode, extensible, sums,
  helds, pots, prompt, price, promptU, covered, maxTokens)

-- Shrink to fit: lower max_tokens to the most output every enforced budget can still pay for,
-- in closed form (no search: a call costs the same whatever its max_tokens and prices). A
-- usd window charges ceil((prompt * in + out * out_price) / 1e6) micro-USD, which is at most
-- `room` exactly when prompt * in + out * out_price <= room * 1e6; an output price of 0 makes
-- any output affordable once the prompt is.
if refusedAt and minOut > 0 and mode == 'reserve' then
  local afford = maxTokens
  for i, b in ipairs(spec.budgets) do
    if b.enforce then
      local room = b.limit - sums[i] - helds[i] - pots[i]
      local out
      if b.unit == 'tokens' then
        out = room - prompt
      elseif price[2] > 0 then
        out = math.floor(((room - toolFee) * 1000000 - prompt * price[1]) / price[2])
      elseif promptU + toolFee <= room then
        out = afford
      else
        out = -1
      end
      afford = math.min(afford, out)
    end
  end
  if afford >= minOut then
    local r, d, sh, nT, nU, wT, wU = check(spec, mode, extensible, sums, helds, pots, prompt, price,
      promptU, covered, afford)
    if r == nil then
      maxTokens, shrunk = afford, true
      refusedAt, deficit, shadowAt = r, d, sh
      needT, needU, worstT, worstU = nT, nU, wT, wU
    end
  end
end

-- The amounts are check's for the max_tokens taken (its hold's output: covered at most).
if covered > maxTokens then
  covered = maxTokens
end

if refusedAt then
  local b = spec.budgets[refusedAt]
  local need = (b.unit == 'usd') and needU or needT
  local retry = retryAfter(spec, b, sums[refusedAt], helds[refusedAt] + pots[refusedAt], need, deficit)
  return refuse(spec, newUser, 'budget_exceeded', refusedAt, retry, needT, needU, windowStates(spec), leafInFlight(spec, inflight), false)
end

if ARGV[18] == '1' then
  -- Evaluated only (an uncounted admit: its prompt taken as 0, the least it can be): it would
  -- fit, so the edge counts it and asks again. Nothing is held, and a new end user's windows
  -- that reading them created are taken away again.
  if newUser then
    forgetWindows(spec)
  end
  return {'fits'}
end

if shadowAt then
  -- A shadow budget would have refused: record it, admit anyway.
  refuse(spec, newUser, 'budget_exceeded', shadowAt, -1, needT, needU, windowStates(spec), leafInFlight(spec, inflight), true)
end

-- Admit. reserve holds the worst case; adaptive holds the estimate (and, when its hold cannot
-- grow, records what it could still overrun); estimate bills the prompt now; post/meter hold
-- nothing.
local heldT, heldU, chargedT, chargedU, potT, potU = 0, 0, 0, 0, 0, 0
if mode == 'reserve' or mode == 'adaptive' then
  heldT, heldU = needT, needU
  if mode == 'adaptive' and not extensible then
    potT, potU = worstT - needT, worstU - needU
  end
elseif mode == 'estimate' then
  chargedT, chargedU = promptT, promptU
end
if mode ~= 'reserve' and mode ~= 'adaptive' then
  covered = maxTokens
end

-- max_tokens as the call sent it (admit.ts: String of an integer) unless shrunk: formatting a
-- number costs as much as a command's argument.
local heldTText, heldUText = I(heldT), I(heldU)
local maxText = maxTokens == maxAsked and ARGV[6] or I(maxTokens)
local states = {nil, nil, nil, nil, nil, nil, nil, nil}
local budgets = spec.budgets
for i = 1, #budgets do
  local b = budgets[i]
  local usd = b.unit == 'usd'
  local amountHeld = usd and heldU or heldT
  local amountCharged = usd and chargedU or chargedT
  local key = KEYS[b.key]
  if amountHeld ~= 0 then
    hold(key, amountHeld, 'h', usd and heldUText or heldTText)
  end
  if potT ~= 0 or potU ~= 0 then
    hold(key, usd and potU or potT, 'p')
  end
  if amountCharged ~= 0 then
    bill(key, bounds(spec, b)[1], amountCharged)
  end
  if b.head and amountCharged == 0 then
    -- windowState's text with the sum as read (a plan's budget has head and tail).
    states[i] = b.head .. sumTexts[i] .. ',' .. I(helds[i] + amountHeld) .. b.tail
  else
    states[i] = windowState(b, sums[i] + amountCharged, helds[i] + amountHeld)
  end
end
local windows = table.concat(states, ';', 1, #budgets)

local expiresAt = now + leaseMs
local nowText, expiresText = I(now), I(expiresAt)
local chargedTText, chargedUText = I(chargedT), I(chargedU)
for n = 1, #spec.levels do
  local lv = spec.levels[n]
  redis.call('ZADD', KEYS[lv.holds], expiresText, resId)
  if chargedT ~= 0 then
    redis.call('HINCRBY', KEYS[lv.state], 'billedT', chargedTText)
    redis.call('HINCRBY', KEYS[lv.state], 'billedU', chargedUText)
  end
end
-- (The root level's ZADD above is the lease index's: KEYS[3].)

-- The record carries everything its close needs (org, levels, windows, prices, what expiry
-- bills: the fixed text, see lib.lua's RECORD_FIXED), so it can be closed after the tenant
-- moved to another org or left the config. Amounts that are 0 are left out.
local covText = covered == maxTokens and maxText or I(covered)
-- `up`: the upstream whose capacity it took, so a capacity.move and the close know where the
-- hold is whatever upstream an edge names (move.lua).
redis.call('HSET', resKey, 'state', 'held', 'r', ARGV[14], 'heldT', heldTText, 'heldU', heldUText,
  'max', maxText, 'cov', covText, 'createdAt', nowText, 'expiresAt', expiresText, 'up', string.sub(ARGV[18], 2))
if chargedT ~= 0 or chargedU ~= 0 then
  redis.call('HSET', resKey, 'chargedT', chargedTText, 'chargedU', chargedUText)
end
if potT ~= 0 or potU ~= 0 then
  redis.call('HSET', resKey, 'potT', I(potT), 'potU', I(potU))
end
if ARGV[17] ~= '' then
  -- The tool-use prices its settlement bills reported uses at (close.lua).
  redis.call('HSET', resKey, 'tf', ARGV[17])
end
if toolFee ~= 0 and heldU == 0 then
  -- The tool fees a call that holds nothing may run up: held beside its worst case when its
  -- tenant switches to holding (adopt).
  redis.call('HSET', resKey, 'tfH', ARGV[16])
end
redis.call('PEXPIRE', resKey, T(leaseMs + spec.keepMs))
if usersKey > 0 then
  -- An end user's windows live as long as it keeps calling (and the longest window after).
  if redis.call('ZADD', KEYS[usersKey], nowText, endUser) == 1 then
    forgetFilter(KEYS[usersKey])
    -- Tracked from this call: a close that leaves it nothing billed or held takes it out again
    -- (close.lua), so calls the upstream fails fill no registry.
    redis.call('HSET', resKey, 'nu', '1')
  end
  if keyUsersKey > 0 then
    redis.call('ZADD', KEYS[keyUsersKey], nowText, endUser)
    redis.call('PEXPIRE', KEYS[keyUsersKey], END_USER_KEEP_TEXT)
  end
  for _, b in ipairs(spec.budgets) do
    if b.scope == 'u' then
      redis.call('PEXPIRE', KEYS[b.key], END_USER_KEEP_TEXT)
    end
  end
end

emitText(ARGV[15] .. '\0time\0' .. nowText .. '\0heldTokens\0' .. heldTText .. '\0heldMicroUsd\0' ..
  heldUText .. '\0maxTokens\0' .. maxText .. '\0chargedTokens\0' .. chargedTText ..
  '\0chargedMicroUsd\0' .. chargedUText .. '\0expiresAt\0' .. expiresText ..
  ((potT ~= 0 or potU ~= 0) and ('\0potentialTokens\0' .. I(potT) .. '\0potentialMicroUsd\0' .. I(potU)) or '') ..
  '\0windows\0' .. windows)

return {'ok', heldTText, heldUText, maxText, shrunk and '1' or '0', expiresText, '0', windows, covText}
