-- Shared helpers, prepended to every script by scripts.ts (Redis has no `require`).
--
-- Amounts are integers (tokens or micro-USD) held in Lua doubles: exact below 2^53. They are
-- always written with I(), because Redis formats a Lua number with "%.14g" and would round
-- anything above 1e14.

local function I(n)
  if n == 0 then
    return '0'
  end
  return string.format('%d', n)
end

local NUMBER_CACHE = 1024

-- `make(key)` kept by key between calls, at most NUMBER_CACHE keys (dropped whole past it);
-- a nil key, or a key `make` gives nil for, is not kept.
local function keptBy(make)
  local kept, count = {}, 0
  return function(key)
    local v = kept[key]
    if v == nil and key ~= nil then
      v = make(key)
      if v ~= nil then
        if count >= NUMBER_CACHE then
          kept, count = {}, 0
        end
        kept[key] = v
        count = count + 1
      end
    end
    return v
  end
end

-- tonumber of a text that takes few values (a price, a config's count, a window's oldest
-- bucket), kept between calls: a table read instead of strtod. Bounded like the plans below
-- (dropped whole at NUMBER_CACHE texts). Amounts that change with every call (sums, holds,
-- a call's tokens) use tonumber: they would only fill it.
-- (A function, not `tonumber` itself: the library's load cannot read globals.)
local N = keptBy(function(text)
  return tonumber(text)
end)

-- I(n) of a number that takes few values (a lease's expiry, how long a record is kept), and
-- a window bucket's field name ('b' .. I(index)), kept between calls the same way.
local T = keptBy(I)
local bucketField = keptBy(function(index)
  return 'b' .. I(index)
end)

-- Year and month (1-12) of a day count since 1970-01-01 (H. Hinnant's civil_from_days).
local function civil(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = (mp < 10) and (mp + 3) or (mp - 9)
  local y = yoe + era * 400
  if m <= 2 then
    y = y + 1
  end
  return y, m
end

-- Days since 1970-01-01 of the first of a month (days_from_civil).
local function monthStartDays(y, m)
  if m <= 2 then
    y = y - 1
  end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m > 2) and (m - 3) or (m + 9)
  local doy = math.floor((153 * mp + 2) / 5)
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

-- A month window whose `calendar` an admin switched keeps its id (`month-<unit>`), so its hash
-- holds the other kind's buckets: a sliding month's are hours since 1970 (above
-- MONTH_INDEX_MAX since 1981), a calendar month's one bucket is the month's index (below it
-- until the year 8333). Sliding it as they are would drop the spend (calendar to sliding: the
-- month index is far behind any hour) or freeze it (sliding to calendar: every hour is ahead
-- of the month, so nothing ever leaves). recut carries the spend over into this kind's buckets
-- instead, once: to a calendar month, the hours billed since the 1st (exactly its spend); to a
-- sliding month, the calendar month's spend at the last hour it may have been billed (the
-- month's last, or now), so it stays at least as long as a sliding window keeps it. Held and
-- potential amounts stay. Returns what slide returns.
local MONTH_INDEX_MAX = 100000

-- Empties a window hash and writes the fields given, keeping its expiry: an end user's window
-- expires 31 days after its last admission, and a DEL then HSET would keep it for good.
local function rewrite(key, ...)
  local ttl = redis.call('PTTL', key)
  redis.call('DEL', key)
  redis.call('HSET', key, ...)
  if ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
end

local function recut(key, lo, start, nb, field, s, h, p)
  local amount, at = 0, start
  if nb == 1 then
    local first = monthStartDays(math.floor(start / 12), start % 12 + 1) * 24
    local raw = redis.call('HGETALL', key)
    for i = 1, #raw, 2 do
      local f = raw[i]
      if string.sub(f, 1, 1) == 'b' and tonumber(string.sub(f, 2)) >= first then
        amount = amount + raw[i + 1]
      end
    end
  else
    local after = lo + 1
    at = math.min(start + nb - 1, monthStartDays(math.floor(after / 12), after % 12 + 1) * 24 - 1)
    if at >= start then
      amount = s
    end
  end
  local text = I(amount)
  rewrite(key, 'h', I(h), 's', text, 'p', I(p), 'lo', T(start))
  local kept = false
  if amount ~= 0 then
    redis.call('HSET', key, bucketField(at), text)
    if field == bucketField(at) then
      kept = text
    end
  end
  return amount, h, p, kept, text
end

-- Window hash layout: s = billed sum inside the window, h = held, p = overrun that adaptive
-- calls whose hold cannot grow could still make, lo = oldest live bucket, b<index> = billed
-- amount of one bucket.
--
-- Slides a window to `start` (oldest bucket still inside it): drops older buckets and
-- subtracts them from the sum. Returns the sum, the held amount and the potential overrun.
-- `field` (optional) is read in the same command: its value is the fourth result. The fifth
-- is the sum as written in the hash (a caller that does not change it reuses the text). The
-- sixth is true when the window did not exist (this slide wrote it: see keepUserWindow).
local function slide(key, start, nb, field)
  local v
  if field then
    v = redis.call('HMGET', key, 's', 'h', 'lo', 'p', field)
  else
    v = redis.call('HMGET', key, 's', 'h', 'lo', 'p')
  end
  -- `x + 0`, not tonumber(x): Lua's tonumber converts a text twice (lua_isnumber, then
  -- lua_tonumber). These fields hold integers when they exist (false when not).
  local sText, h, p = v[1] or '0', v[2], v[4]
  local s = sText + 0
  h, p = h and h + 0 or 0, p and p + 0 or 0
  local lo = N(v[3])
  if lo == nil then
    redis.call('HSET', key, 'lo', T(start))
    return s, h, p, v[5], sText, true
  end
  if (nb == 1 and lo >= MONTH_INDEX_MAX) or (nb == 720 and lo < MONTH_INDEX_MAX) then
    return recut(key, lo, start, nb, field, s, h, p)
  end
  if lo < start then
    if start - lo >= nb then
      -- Idle longer than the window: every bucket has left it.
      s, sText, v[5] = 0, '0', false
      rewrite(key, 'h', I(h), 's', '0', 'p', I(p), 'lo', T(start))
    else
      -- The buckets that left it, read and dropped in one command each.
      local fields = {}
      for b = lo, start - 1 do
        fields[#fields + 1] = bucketField(b)
      end
      local x = redis.call('HMGET', key, unpack(fields))
      for n = 1, #fields do
        if x[n] then
          s = s - x[n]
        end
      end
      redis.call('HDEL', key, unpack(fields))
      sText = I(s)
      redis.call('HSET', key, 's', sText, 'lo', T(start))
    end
  end
  return s, h, p, v[5], sText
end

-- How long an end user's window outlives its last admission: script-args.ts END_USER_KEEP_MS
-- (a unit test holds the two equal), and as a command's argument.
local END_USER_KEEP_MS = 2678400000
local END_USER_KEEP_TEXT = '2678400000'

-- An end user's window that `slide` has just written (it did not exist: read for a refusal,
-- a close or a usage read, or a budget added to end users) expires as admission keeps one,
-- rather than living for good outside any admission's PEXPIRE.
local function keepUserWindow(b, key, fresh)
  if fresh and b.scope == 'u' then
    redis.call('PEXPIRE', key, END_USER_KEEP_MS)
  end
end

-- Bills `amount` (may be negative) into the current bucket of a window.
local function bill(key, cur, amount)
  if amount ~= 0 then
    redis.call('HINCRBY', key, bucketField(cur), I(amount))
    redis.call('HINCRBY', key, 's', I(amount))
  end
end

-- Changes a window's held amount (field 'h') or potential overrun ('p'), never below zero.
-- `text` (optional): the amount already written with I().
local function hold(key, amount, field, text)
  field = field or 'h'
  if amount ~= 0 then
    local h = redis.call('HINCRBY', key, field, text or I(amount))
    if h < 0 then
      redis.call('HSET', key, field, '0')
    end
  end
end

-- The ms from `at` (a text) to `now`, never below 0, as text (math.max is a C call: costlier).
local function elapsed(now, at)
  local d = now - at
  return I(d > 0 and d or 0)
end

-- The instant of this call (epoch ms): Redis's own clock, so every authority replica decides
-- every window against one time source whatever the skew between their hosts. A spec `now`
-- (a test's movable clock) takes its place.
local function clockNow(spec)
  if spec.now then
    return spec.now
  end
  local t = redis.call('TIME')
  local us = t[2] + 0
  return N(t[1]) * 1000 + (us - us % 1000) / 1000
end

-- The `n` fields of ARGV[at], a text that packs what a script reads rarely ('\1'-joined:
-- admit.ts, close.ts), in one match where read: each FCALL argument costs Redis a string and
-- a slot whether the script reads it or not (~300-650 instructions), and a field matched out
-- of a text costs about as much again (one match of 14: 15,500, a gmatch loop 33,000), so
-- only what most calls never read is packed.
local FIELD_PATTERNS = {}
local function fields(at, n)
  local p = FIELD_PATTERNS[n]
  if not p then
    p = '^' .. string.rep('([^\1]*)\1', n - 1) .. '(.*)$'
    FIELD_PATTERNS[n] = p
  end
  return string.match(ARGV[at], p)
end

-- A budget as positional ARGV from `i` (script-args.ts budgetArgs): tenant, id, window, unit,
-- limit, enforce, calendar, debt, scope, subject, key index, and its window state's text
-- before and after `used,held`.
local BUDGET_ARGS = 13
local function readBudget(i)
  return {tenant = ARGV[i], id = ARGV[i + 1], window = ARGV[i + 2], unit = ARGV[i + 3],
    limit = tonumber(ARGV[i + 4]), enforce = ARGV[i + 5] == '1', calendar = ARGV[i + 6] == '1',
    debt = tonumber(ARGV[i + 7]), scope = ARGV[i + 8], subject = ARGV[i + 9],
    key = tonumber(ARGV[i + 10]), head = ARGV[i + 11], tail = ARGV[i + 12]}
end

-- A tenant's plan in full from `i` (script-args.ts templateArgs): kp, org, tenant, keepMs, the
-- record's levels and holds texts (see below); the levels' count, then tenant, state and holds
-- key indexes, maxInFlight each; the budgets' count, then each budget (readBudget).
local function parseTemplate(i)
  local m = {kp = ARGV[i], org = ARGV[i + 1], tenant = ARGV[i + 2], keepMs = tonumber(ARGV[i + 3]),
    levelsText = ARGV[i + 4], holdsText = ARGV[i + 5], levels = {}, budgets = {}, now = false,
    own = false}
  i = i + 6
  for l = 1, tonumber(ARGV[i]) do
    m.levels[l] = {tenant = ARGV[i + 1], state = tonumber(ARGV[i + 2]), holds = tonumber(ARGV[i + 3]),
      maxInFlight = tonumber(ARGV[i + 4])}
    i = i + 4
  end
  i = i + 1
  for n = 1, tonumber(ARGV[i]) do
    m.budgets[n] = readBudget(i + 1)
    i = i + BUDGET_ARGS
  end
  return m, i + 1
end

-- Tenants' plans kept between calls, by id (a hash of the plan's text, so an id names one
-- content), while the library stays loaded: a call names its tenant's plan instead of sending
-- its 40-70 arguments, which Redis would turn into strings, numbers and tables on every call.
-- Two generations, the older dropped whole when the newer has PLAN_GENERATION plans (a plan in
-- use moves to the newer): at most twice that many kept, whatever the configs and tenants. A
-- node that has not seen a plan (restarted, promoted, the library reloaded, the plan evicted)
-- answers NOPLAN before it reads or writes anything, and the authority sends the plan in full.
-- Replicas never run the scripts (Redis replicates their writes), so each master keeps its own.
local PLAN_GENERATION = 1024
local plans, oldPlans, planCount = {}, {}, 0

local function keepPlan(id, m)
  if planCount >= PLAN_GENERATION then
    plans, oldPlans, planCount = {}, plans, 0
  end
  plans[id] = m
  planCount = planCount + 1
end

-- The plan from `at` (script-args.ts Plan.args): its id; '1' and the plan in full (parseTemplate)
-- or '0' for one this node keeps; then the budgets of the call's own key and end user: their
-- count, each budget (readBudget) and, if any, their holds' codes (for the record's holds text).
-- A call without budgets of its own gets the kept plan as its spec, `now` reset (the scripts
-- set only `now` on it); one with them a spec of its own (the kept levels and budgets are
-- only read), `own` their holds' codes (false: none).
local function readPlan(at)
  local id = ARGV[at]
  local m, i = plans[id], at + 2
  if ARGV[at + 1] == '1' then
    m, i = parseTemplate(i)
    keepPlan(id, m)
  elseif not m then
    m = oldPlans[id]
    if not m then
      error({err = 'NOPLAN this Redis does not hold plan ' .. id})
    end
    keepPlan(id, m)
  end
  local budgets, holdsText = m.budgets, m.holdsText
  local extra = N(ARGV[i])
  if extra == 0 then
    -- The kept plan itself: only `now` is set per call (Redis runs one script at a time).
    m.now = false
    return m
  end
  budgets = {unpack(m.budgets)}
  for n = 1, extra do
    budgets[#budgets + 1] = readBudget(i + 1 + (n - 1) * BUDGET_ARGS)
  end
  local codes = ARGV[i + 1 + extra * BUDGET_ARGS]
  holdsText = (holdsText == '') and codes or (holdsText .. ';' .. codes)
  -- Every field the scripts set later is in the constructor (now: false until set), so the
  -- table is sized once.
  return {kp = m.kp, org = m.org, tenant = m.tenant, keepMs = m.keepMs, levelsText = m.levelsText,
    holdsText = holdsText, levels = m.levels, budgets = budgets, now = false, own = codes}
end

-- {current bucket, oldest bucket in the window, buckets per window, bucket length ms} of a
-- window at `now`; a calendar month is one bucket, the month's index (year * 12 + month - 1).
local function windowBounds(now, window, calendar)
  if window == 'month' and calendar then
    local y, m = civil(math.floor(now / 86400000))
    local index = y * 12 + m - 1
    return {index, index, 1, 0}
  end
  -- Sliding windows: buckets of `ms`, `n` of them (the same table as WINDOW_GRANULARITY in
  -- @holdfast/events; an if chain, as a table would be built again on every call).
  local ms, n
  if window == 'minute' then
    ms, n = 1000, 60
  elseif window == 'day' then
    ms, n = 60000, 1440
  else
    ms, n = 3600000, 720
  end
  local cur = math.floor(now / ms)
  return {cur, cur - n + 1, n, ms}
end

-- The first instant of the next calendar month (UTC), ms.
local function nextMonthMs(now)
  local y, m = civil(math.floor(now / 86400000))
  if m == 12 then
    y, m = y + 1, 1
  else
    m = m + 1
  end
  return monthStartDays(y, m) * 86400000
end

-- Bounds of a budget's window at the spec's `now`. They depend only on the bucket `now` is in
-- (for a calendar month, its day), so they are kept per window kind between calls, by that
-- bucket: calls in the same bucket share them (read only).
local boundsKept = {minute = false, day = false, month = false, calmonth = false}
local function bounds(spec, b)
  local window = b.window
  local calendar = window == 'month' and b.calendar
  local kind, unit
  if calendar then
    kind, unit = 'calmonth', 86400000
  elseif window == 'minute' then
    kind, unit = window, 1000
  elseif window == 'day' then
    kind, unit = window, 60000
  else
    kind, unit = 'month', 3600000
  end
  local now = spec.now
  -- math.floor(now / unit) without a C call (now and unit are integers: exact).
  local at = (now - now % unit) / unit
  local kept = boundsKept[kind]
  if kept and kept[1] == at then
    return kept[2]
  end
  local bd = windowBounds(now, window, calendar)
  boundsKept[kind] = {at, bd}
  return bd
end

-- Cost in micro-USD (rounded up) of tokens at integer pico-USD per token prices: price =
-- {uncached input, output, cached input, 5-minute cache write, 1-hour cache write, audio
-- input, audio output}. `cached`, `w5`, `w1h` and `aIn` are parts of `input` (settleParts
-- keeps them within it), `aOut` of `output`; holds pass none of them (and their dearest input
-- and output prices).
local function cost(input, cached, output, price, w5, w1h, aIn, aOut)
  local pico = (input - cached) * price[1] + cached * price[3] + output * price[2]
  if w5 then
    pico = pico + w5 * (price[4] - price[1]) + w1h * (price[5] - price[1])
  end
  if aIn then
    pico = pico + aIn * (price[6] - price[1]) + aOut * (price[7] - price[2])
  end
  local micro = math.floor(pico / 1000000)
  if micro * 1000000 < pico then
    micro = micro + 1
  end
  return micro
end

-- A settle's usage as `cost` bills it: the audio prompt tokens first (at most the prompt),
-- then the cache reads and writes within what is left, in that order, and the audio output
-- within the output. An upstream that reports parts that overlap or exceed their total bills
-- each token once, at most at its total, never a negative count.
-- (Comparisons, not math.min: a C call costs more than the rest of the function.)
local function settleParts(u)
  if u.aIn > u.prompt then
    u.aIn = u.prompt
  end
  local rest = u.prompt - u.aIn
  if u.cached > rest then
    u.cached = rest
  end
  rest = rest - u.cached
  if u.w5 > rest then
    u.w5 = rest
  end
  if u.w1h > rest - u.w5 then
    u.w1h = rest - u.w5
  end
  if u.aOut > u.completion then
    u.aOut = u.completion
  end
  return u
end

-- The service tier a settle is billed at and its prices (`cost`'s order) over `base`: the tier
-- the provider reported when the record prices it (`default` and Anthropic's `standard` are
-- the base), else the tier held (`held`; '' or nil on a record from before tiers: the base).
-- `tiers` is the record's text of the tiers priced beside the base (admit.ts recordTiers:
-- `name:un,out,cached,w5,w1h,aIn,aOut` joined by ';'). Tier names are [a-z][a-z0-9_]*: no
-- pattern's magic character.
local function pricedTier(tier, tiers, base)
  if tier == 'default' or tier == 'standard' then
    return 'default', base
  end
  local text = tiers and tier ~= '' and string.match(';' .. tiers, ';' .. tier .. ':([%d,]*)')
  if not text then
    return nil
  end
  local p = {}
  for n in string.gmatch(text, '%d+') do
    p[#p + 1] = tonumber(n)
  end
  return tier, {p[1], p[2], p[3], p[4], p[5], p[6], p[7]}
end
local function tierPrice(reported, held, tiers, base)
  local tier, price = pricedTier(reported, tiers, base)
  if tier then
    return tier, price
  end
  tier, price = pricedTier(held or '', tiers, base)
  if tier then
    return tier, price
  end
  return 'default', base
end

-- The long-context prices (`cost`'s order) a settle of `input` prompt tokens (cache reads and
-- writes included) at `tier` (tierPrice's name: `default` for the base) is billed at: the
-- tier's when the record prices its long context and the input is above its line; else nil
-- (the tier's own prices). `long` is the record's text (admit.ts recordLongContext:
-- `name>line:un,out,cached,w5,w1h,aIn,aOut` joined by ';'; nil or '' on a record from before
-- long-context prices, or a model without any).
local function longPrice(tier, long, input)
  if not long or long == '' then
    return nil
  end
  local line, text = string.match(';' .. long, ';' .. tier .. '>(%d+):([%d,]*)')
  if not line or input <= tonumber(line) then
    return nil
  end
  local p = {}
  for n in string.gmatch(text, '%d+') do
    p[#p + 1] = tonumber(n)
  end
  return {p[1], p[2], p[3], p[4], p[5], p[6], p[7]}
end

-- The provider-run tool uses a settle reports and their fees (close.lua): `uses` is the
-- settle's text (close.ts: `kind:count` joined by ','), `prices` the record's `tf` (admit.ts:
-- `kind:micro-USD per 1,000 uses`, or the model's current ones for a record without). Returns
-- the uses, all kinds together, and their fee in micro-USD rounded up once; a kind without a
-- price costs nothing (the edge refuses a call offering one that carries a fee). Kind names
-- are [a-z_]: no pattern's magic character.
local function toolFees(uses, prices)
  local n, milli = 0, 0
  local priced = ',' .. (prices or '') .. ','
  for kind, count in string.gmatch(uses, '([%a_]+):(%d+)') do
    count = tonumber(count)
    n = n + count
    local p = string.match(priced, ',' .. kind .. ':(%d+),')
    if p then
      milli = milli + count * tonumber(p)
    end
  end
  local micro = math.floor(milli / 1000)
  if micro * 1000 < milli then
    micro = micro + 1
  end
  return n, micro
end

-- One window's state for replies and events: tenant,budget,limit,used,held,enforce, and for
-- a key's or an end user's budget also its scope (k, u) and subject.
local function windowState(b, s, h)
  if b.head then
    return b.head .. I(s) .. ',' .. I(h) .. b.tail
  end
  local state = b.tenant .. ',' .. b.id .. ',' .. I(b.limit) .. ',' .. I(s) .. ',' .. I(h) .. ',' .. (b.enforce and '1' or '0')
  if b.scope == 'k' or b.scope == 'u' then
    state = state .. ',' .. b.scope .. ',' .. b.subject
  end
  return state
end

-- Slides every budget of the plan and returns their states joined by ';'. `charged` (close.lua,
-- optional): what the change added to windows it charged otherwise than its event, by key;
-- their states end in `,c,<amount>` (windows.ts parseWindows).
local function windowStates(spec, charged)
  local out = {}
  for i = 1, #spec.budgets do
    local b = spec.budgets[i]
    local key = KEYS[b.key]
    local bd = bounds(spec, b)
    local s, h, _, _, _, fresh = slide(key, bd[2], bd[3])
    keepUserWindow(b, key, fresh)
    out[i] = windowState(b, s, h)
    local c = charged and charged[key]
    if c then
      out[i] = out[i] .. ',c,' .. I(c)
    end
  end
  return table.concat(out, ';')
end

-- Refusal events are rate limited per tenant: the first `rate` of each second are written in
-- full, the rest are counted in the org's summary hash by `kind` (and the last one's fields
-- kept) and written as one event with a count when the sweeper flushes it (lua/refusals.lua,
-- within about a second). Every refusal is still answered, counted in metrics and, summarised,
-- in ClickHouse. True when this refusal's event is to be written now.
local function refusalWritten(stateKey, summaryKey, now, rate, kind, fields)
  local sec = math.floor(now / 1000)
  local v = redis.call('HMGET', stateKey, 'rfS', 'rfN')
  if tonumber(v[1]) ~= sec then
    redis.call('HSET', stateKey, 'rfS', I(sec), 'rfN', '1')
    return true
  end
  if (tonumber(v[2]) or 0) < rate then
    redis.call('HINCRBY', stateKey, 'rfN', 1)
    return true
  end
  redis.call('HINCRBY', summaryKey, kind, 1)
  redis.call('HSET', summaryKey, kind .. '|last', cjson.encode(fields))
  return false
end

-- Appends an event to the org's outbox (KEYS[1]); the relay publishes it to JetStream. The
-- entry is one field `e`, the event's names and values joined by NUL: a stream entry of 25
-- field pairs costs Redis 4x the time of one field (every value here is an id, a number, an
-- enum or printable ASCII, never NUL; events with free text use emitFlat).
local function emitText(text)
  redis.call('XADD', KEYS[1], '*', 'e', text)
end
local function emit(fields)
  emitText(table.concat(fields, '\0'))
end

-- An event's field for emitText ('\0name\0value'), or '' at the value every reader fills when
-- it is absent (a field with a schema default): the wire leaves it out.
local function atDefault(name, value, default)
  if value == default then return '' end
  return '\0' .. name .. '\0' .. value
end

-- An entry of field/value pairs (the values may hold any byte).
local function emitFlat(fields)
  redis.call('XADD', KEYS[1], '*', unpack(fields))
end

-- Reservation records name the windows they hold on compactly (script-args.ts holdCode writes
-- them), so the record stays a small listpack hash: levels as "team;org", holds as "<level index><window><unit>" per budget
-- ("0Mt" = level 0's month-tokens window, "1Cu" = level 1's calendar-month usd window; "KMt"
-- the key's, "UMt" the end user's; "@dept2Mt" a level its team moved under since admission,
-- not among the record's levels). Keys are rebuilt from the prefix, the record's org, and
-- its keyId and endUser.

local function tenantKey(spec, tenant, suffix)
  return spec.kp .. ':{' .. spec.org .. '}:t:' .. tenant .. suffix
end

-- A key's own keys (keys.ts: `<p>:{<org>}:k:<tenant>:<key><suffix>`).
local function keyKey(spec, tenant, keyId, suffix)
  return spec.kp .. ':{' .. spec.org .. '}:k:' .. tenant .. ':' .. keyId .. suffix
end

-- The keys of `list` that are not in KEYS, or nil when all are. A script touches only keys
-- declared in KEYS (Redis Cluster routes a call by them, and a script reaching an undeclared
-- key fails there, its writes before it applied, while that key's slot migrates): one that
-- finds it needs others returns them ({'keys', ...}) before it changes anything, and its
-- caller runs it again with them declared (scripts.ts withDeclared).
local function undeclared(list)
  local missing
  for _, key in ipairs(list) do
    local found = false
    for i = 1, #KEYS do
      if KEYS[i] == key then
        found = true
        break
      end
    end
    if not found then
      missing = missing or {}
      missing[#missing + 1] = key
    end
  end
  return missing
end

-- The record's levels: list of tenant ids, leaf first.
local function recordLevels(text)
  local out = {}
  for t in string.gmatch(text or '', '[^;]+') do
    out[#out + 1] = t
  end
  return out
end

-- The record's holds: list of {window key, unit, budget (window, calendar, tenant, id, and
-- scope and subject for a key's or an end user's)}. `rec` is the record's tenant, keyId and
-- endUser (for key and end-user windows). The record does not keep the budget's limit: the
-- budget has limit 0 and enforce false (windowState of a window the plan no longer has).
local function recordHolds(spec, levels, text, rec)
  local WINDOW_NAME = {m = 'minute', d = 'day', M = 'month', C = 'month'}
  local UNIT_NAME = {t = 'tokens', u = 'usd'}
  local out = {}
  for code in string.gmatch(text or '', '[^;]+') do
    local at = string.sub(code, 1, -3)
    local w = string.sub(code, -2, -2)
    local window = WINDOW_NAME[w]
    local unit = UNIT_NAME[string.sub(code, -1)]
    local id = window .. '-' .. unit
    local budget = {window = window, calendar = (w == 'C'), tenant = levels[1], id = id,
      limit = 0, enforce = false, scope = false, subject = false}
    local key
    if at == 'K' then
      budget.scope, budget.subject = 'k', rec.keyId
      key = keyKey(spec, rec.tenant, rec.keyId, ':w:' .. id)
    elseif at == 'U' then
      budget.scope, budget.subject = 'u', rec.endUser
      key = spec.kp .. ':{' .. spec.org .. '}:u:' .. rec.tenant .. ':' .. rec.endUser .. ':w:' .. id
    else
      -- '@<tenant>': a level its team moved under while the call was held (admit.lua's adopt).
      budget.tenant = string.sub(at, 1, 1) == '@' and string.sub(at, 2) or levels[tonumber(at) + 1]
      key = tenantKey(spec, budget.tenant, ':w:' .. id)
    end
    out[#out + 1] = {key, unit, budget}
  end
  return out
end

-- `windows` (windowStates' text: the plan's) followed by the windows of `holds` (recordHolds'
-- list) that the plan no longer has: the call was held on them and their budget was removed,
-- or the tenant moved or left the config, since. A script that changed them (close.lua gives
-- the hold back and bills them, extend.lua grows it) lists them so, and its event names every
-- window it changed (the drift audit, a rebuild and the alerter read windows from events):
-- each with its state now, limit 0, enforce 0 (recordHolds' budget: no limit any more) and
-- `,r` (WindowState.removed). Slides only those windows; `holds` nil lists none.
local function withRemoved(spec, windows, holds)
  local planned, out = {}, {}
  for _, b in ipairs(spec.budgets) do
    planned[KEYS[b.key]] = true
  end
  for _, r in ipairs(holds or {}) do
    local key, b = r[1], r[3]
    if not planned[key] then
      local bd = bounds(spec, b)
      local s, h, _, _, _, fresh = slide(key, bd[2], bd[3])
      keepUserWindow(b, key, fresh)
      out[#out + 1] = windowState(b, s, h) .. ',r'
    end
  end
  if #out == 0 then
    return windows
  end
  local listed = table.concat(out, ';')
  return windows == '' and listed or (windows .. ';' .. listed)
end

-- A reservation record: what a script decides or changes, as fields of their own (state,
-- heldT, heldU, max, cov, expiresAt, createdAt, chargedT, chargedU, potT, potU; closing adds
-- closedAt, billedT, billedU, expT, expU), and `r`: what the call and its plan fixed before
-- admission, RECORD_FIXED's fields joined by \1 (admit.ts writes it; no value holds \1).
-- Written as 31 fields, the record's HSET took a quarter of admit's time. A record without
-- `r` (written before it existed, or by rebuild) has those fields as fields of their own.
--
-- The fixed fields of a record, in RECORD_FIXED's order (false where an old record has none).
-- A record admitted before audio prices existed has 20 of them (the last six are nil), one
-- admitted before service tiers 23 (the last three are nil), one before long-context prices
-- or of a model without any 25 (`long` is nil: billed at its tiers' own prices).
local RECORD_PATTERN_25 = '^([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1(.*)$'
local RECORD_PATTERN_23 = '^([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1(.*)$'
local RECORD_PATTERN_20 = '^([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1([^\1]*)\1(.*)$'
local function recordFixed(key, r)
  if r then
    -- RECORD_PATTERN_25: 24 times '([^\1]*)\1', then '(.*)$' (a literal: the library's load
    -- cannot call `string`); _23 and _20 the same with 22 and 19. Longest first: a shorter
    -- pattern's last capture would take the fields after it. A record with long-context
    -- prices has a 26th field: the 25th capture is then `tiers \1 long`, split here (one
    -- match whatever the record, where trying a 26-field pattern first failed on most).
    local x = {string.match(r, RECORD_PATTERN_25)}
    if x[1] then
      local tiers, long = string.match(x[25], '^([^\1]*)\1(.*)$')
      if tiers then
        x[25] = tiers
        x[26] = long
      end
      return x
    end
    x = {string.match(r, RECORD_PATTERN_23)}
    if x[1] then
      return x
    end
    return {string.match(r, RECORD_PATTERN_20)}
  end
  local RECORD_FIXED = {'tenant', 'org', 'keyId', 'useCase', 'model', 'mode', 'api', 'prompt',
    'priceIn', 'priceOut', 'priceCached', 'priceUn', 'priceW5', 'priceW1h', 'leaseMs', 'levels',
    'holds', 'sampleN', 'expB', 'endUser', 'priceAIn', 'priceAOut', 'priceHOut', 'tier', 'tiers',
    'long'}
  return redis.call('HMGET', key, unpack(RECORD_FIXED))
end
