-- capacity: an upstream's account limits (tokens and requests per minute) as a budget that
-- every tenant shares, each priority up to its share. Sliding minute windows of 1 s buckets,
-- one per scope (the upstream, or a model on it); every scope of an upstream carries its tag,
-- so the call's scopes are one slot (and never the org's: see docs/budgets.md).
--
-- Amounts are billed into the bucket of the admission (no separate held amount): a call's
-- share leaves the window 60 s later whatever happens to the call, so nothing can leak.
--
-- KEYS[1..n]  the scopes' window hashes (t<bucket>, r<bucket>, st, sr, lo; blockedUntil;
--             shrunkLimit, shrunkUntil)
-- KEYS[n+1]   the reservation's capacity record (bucket, tokens; tenant: 1 when the tenant's
--             windows were billed too; scopes: the scope keys billed, '\n'-joined; cu: '1'
--             when they count usage, '0' requested), kept 2 minutes
-- KEYS[n+2..2n+1]  take, settle and release, optional: the tenant's own window of each scope
--             (the same fields but the block and shrink), for `tenantShare`
-- ARGV[1]     spec (JSON): op ('take' | 'settle' | 'release' | 'answered' | 'report' | 'peek'),
--             noRecord
--             (take: write and read no record, KEYS[n+1] unused), limits
--             [[tokensPerMinute, requestsPerMinute], ...] (0: no limit), share, tokens,
--             tenantShare (take, with the tenant's keys: the most of each limit one tenant may
--             take), usage (settle; counting 'usage' only), counting ('requested' | 'usage'),
--             retryAfterMs, remainingTokens, resetMs (report), requests (answered: the
--             attempts the provider answered, each a request its account counted; default 1);
--             declared (settle/release/answered: the 1-based indexes of KEYS[1..n] the config
--             declares now, closed for a record without `scopes`; the close passes every scope
--             the take may have billed, declared or not); `now` under a test clock
--
-- Returns take: {'ok'} or {'full', retryAfterSeconds, scope (1-based), used, limit, who[,
--         series]} (who: 'all', the scope is full for the priority; 'tenant', the tenant's
--         share is; retryAfterSeconds -1: the call is more than that share of the declared
--         limits allows in a whole minute, in `series` ('tokens' or 'requests'): it never fits)
--         settle/release/answered: {'settled' | 'released' | 'answered' | 'unknown'}
--         (answered: the tokens given back, the request kept); report: {'reported'};
--         peek: {'tokens,requests,blockedUntil' per scope}

local spec = cjson.decode(ARGV[1])
local now = clockNow(spec)
local n = #spec.limits
local record = KEYS[n + 1]
-- The tenant's windows, when given (KEYS[n+2..2n+1]).
local tenantKeys = #KEYS >= 2 * n + 1
local current = math.floor(now / 1000)
local oldest = current - 59

-- Drops buckets older than the window from a scope's sums; returns tokens and requests in it.
local function slideCap(key)
  local v = redis.call('HMGET', key, 'st', 'sr', 'lo')
  local st, sr, lo = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3])
  if lo == nil or lo >= oldest then
    if lo == nil then
      redis.call('HSET', key, 'lo', I(oldest))
    end
    return st, sr
  end
  if oldest - lo >= 60 then
    local keep = redis.call('HMGET', key, 'blockedUntil', 'shrunkLimit', 'shrunkUntil')
    redis.call('DEL', key)
    redis.call('HSET', key, 'st', '0', 'sr', '0', 'lo', I(oldest))
    for i, f in ipairs({'blockedUntil', 'shrunkLimit', 'shrunkUntil'}) do
      if keep[i] then
        redis.call('HSET', key, f, keep[i])
      end
    end
    return 0, 0
  end
  for b = lo, oldest - 1 do
    local t = redis.call('HGET', key, 't' .. I(b))
    local r = redis.call('HGET', key, 'r' .. I(b))
    if t then
      st = st - tonumber(t)
      sr = sr - tonumber(r or '0')
      redis.call('HDEL', key, 't' .. I(b), 'r' .. I(b))
    end
  end
  redis.call('HSET', key, 'st', I(st), 'sr', I(sr), 'lo', I(oldest))
  return st, sr
end

-- A tenant's window (tenantShare): slid as a scope's is, and kept only 2 minutes past its
-- last use (what it holds has left the window by then).
local function slideOwn(key)
  local st, sr = slideCap(key)
  redis.call('PEXPIRE', key, 120000)
  return st, sr
end

-- A scope's window lives 2 minutes past its last change (what it holds has left the minute by
-- then), or until the provider's block or shrink it keeps ends, whichever is later: a scope an
-- admin removes goes with its window. Before, every scope's window lived forever, one key per
-- scope ever declared (and a close of a call on a removed one wrote into it).
local function keepCap(key)
  local f = redis.call('HMGET', key, 'blockedUntil', 'shrunkUntil')
  local til = math.max(tonumber(f[1]) or 0, tonumber(f[2]) or 0)
  redis.call('PEXPIRE', key, math.max(120000, til - now))
end

local function billCap(key, bucket, tokens, requests)
  if bucket < oldest then
    return -- already left the window
  end
  redis.call('HINCRBY', key, 't' .. I(bucket), I(tokens))
  redis.call('HINCRBY', key, 'r' .. I(bucket), I(requests))
  redis.call('HINCRBY', key, 'st', I(tokens))
  redis.call('HINCRBY', key, 'sr', I(requests))
end

-- Seconds until `need` more of a series fits below `room` (the oldest buckets leaving first).
local function waitFor(key, prefix, used, need, allowed)
  local target = used + need - allowed
  if target <= 0 then
    return 0
  end
  local freed = 0
  for b = oldest, current do
    local x = tonumber(redis.call('HGET', key, prefix .. I(b)) or '0')
    freed = freed + x
    if freed >= target then
      return math.max(1, math.ceil(((b + 60) * 1000 - now) / 1000))
    end
  end
  return 60
end

-- What `share` of a window's declared limits allows a minute (tokens, requests). `least`: the
-- smallest part of a limit the share allows (a tenant's share is at least one request a
-- minute, however small the limit: else it could never call).
local function allowed(tpm, rpm, share, least)
  return math.max(least, math.floor(tpm * share)), math.max(least, math.floor(rpm * share))
end

-- The series ('tokens' or 'requests') in which a call of spec.tokens is more than `share` of
-- the declared limits allows in a whole minute: it never fits, however long it waits. nil: it
-- may fit.
local function never(lim, share, least)
  local allowedT, allowedR = allowed(lim[1], lim[2], share, least)
  if lim[1] > 0 and spec.tokens > allowedT then
    return 'tokens'
  end
  if lim[2] > 0 and allowedR < 1 then
    return 'requests'
  end
  return nil
end

-- Seconds until a call of spec.tokens fits `share` of a window's limits (0: it fits now).
local function waitShare(key, st, sr, tpm, rpm, share, least)
  local allowedT, allowedR = allowed(tpm, rpm, share, least)
  local waitT = (tpm > 0) and waitFor(key, 't', st, spec.tokens, allowedT) or 0
  local waitR = (rpm > 0) and waitFor(key, 'r', sr, 1, allowedR) or 0
  return math.max(waitT, waitR)
end

if spec.op == 'take' then
  -- The tenant's own windows are checked and billed too (capacity.tenantShare).
  local capped = tenantKeys and spec.tenantShare ~= nil and spec.tenantShare < 1
  -- noRecord: a count (capacity.count), never closed nor retried, keeps no record.
  if not spec.noRecord and redis.call('EXISTS', record) == 1 then
    return {'ok'} -- a retried admit: taken already
  end
  for i = 1, n do
    local key, lim = KEYS[i], spec.limits[i]
    local st, sr = slideCap(key)
    local f = redis.call('HMGET', key, 'blockedUntil', 'shrunkLimit', 'shrunkUntil')
    local blocked = tonumber(f[1]) or 0
    if blocked > now then
      return {'full', I(math.max(1, math.ceil((blocked - now) / 1000))), I(i), I(st), I(lim[1]), 'all'}
    end
    -- A call more than its share of the declared limits allows in a minute: never (-1).
    local out = never(lim, spec.share, 0)
    if out then
      return {'full', '-1', I(i), I(st), I(lim[1]), 'all', out}
    end
    if capped then
      out = never(lim, spec.tenantShare, 1)
      if out then
        return {'full', '-1', I(i), I(st), I(lim[1]), 'tenant', out}
      end
    end
    local tpm = lim[1]
    if tonumber(f[3] or '0') > now and tpm > 0 then
      tpm = math.min(tpm, tonumber(f[2]))
    end
    local wait = waitShare(key, st, sr, tpm, lim[2], spec.share, 0)
    if wait > 0 then
      return {'full', I(wait), I(i), I(st), I(tpm), 'all'}
    end
    if capped then
      -- One tenant's calls may take at most tenantShare of each limit in any minute.
      local own = KEYS[n + 1 + i]
      local tt, tr = slideOwn(own)
      local ownWait = waitShare(own, tt, tr, tpm, lim[2], spec.tenantShare, 1)
      if ownWait > 0 then
        return {'full', I(ownWait), I(i), I(tt), I(tpm), 'tenant'}
      end
    end
  end
  for i = 1, n do
    billCap(KEYS[i], current, spec.tokens, 1)
    keepCap(KEYS[i])
    if capped then
      billCap(KEYS[n + 1 + i], current, spec.tokens, 1)
    end
  end
  if spec.noRecord then
    return {'ok'}
  end
  -- The scopes taken of: a close gives back (or settles) only those, whatever scopes the
  -- config declares by then (one declared since would count less than was sent).
  local scopes = {}
  for i = 1, n do
    scopes[i] = KEYS[i]
  end
  redis.call('HSET', record, 'bucket', I(current), 'tokens', I(spec.tokens), 'scopes',
    table.concat(scopes, '\n'), 'cu', spec.counting == 'usage' and '1' or '0')
  if capped then
    redis.call('HSET', record, 'tenant', '1')
  end
  redis.call('PEXPIRE', record, 120000)
  return {'ok'}
end

if spec.op == 'peek' then
  -- What the last minute used of each scope (the status page).
  local out = {}
  for i = 1, n do
    local st, sr = slideCap(KEYS[i])
    keepCap(KEYS[i])
    out[#out + 1] = I(st) .. ',' .. I(sr) .. ',' .. (redis.call('HGET', KEYS[i], 'blockedUntil') or '0')
  end
  return out
end

if spec.op == 'report' then
  -- The provider refused (429) or said how much it has left: believe it until its reset.
  for i = 1, n do
    local key = KEYS[i]
    local st = slideCap(key)
    if spec.retryAfterMs and spec.retryAfterMs > 0 then
      redis.call('HSET', key, 'blockedUntil', I(now + spec.retryAfterMs))
    end
    if spec.remainingTokens and spec.resetMs and spec.resetMs > 0 then
      redis.call('HSET', key, 'shrunkLimit', I(st + spec.remainingTokens), 'shrunkUntil', I(now + spec.resetMs))
    end
    keepCap(key)
  end
  return {'reported'}
end

local r = redis.call('HMGET', record, 'bucket', 'tokens', 'tenant', 'scopes', 'cu')
if not r[1] then
  return {'unknown'}
end
local bucket, tokens = tonumber(r[1]), tonumber(r[2])
redis.call('DEL', record)
-- The scopes billed: the shared windows the take billed (a record from before `scopes`: all
-- of them), and the tenant's when the take billed them.
local taken = {}
if r[4] then
  for key in string.gmatch(r[4], '[^\n]+') do
    taken[key] = true
  end
else
  for _, i in ipairs(spec.declared or {}) do
    taken[KEYS[i]] = true
  end
end
-- How the take counts: as its record says (the config may declare it no more), else the
-- config's.
local counting = spec.counting
if r[5] then
  counting = r[5] == '1' and 'usage' or 'requested'
end
local billed = {}
for i = 1, n do
  -- A window gone (expired: every take in it left the minute long ago) gets nothing back, and
  -- no key is made for it.
  if taken[KEYS[i]] and redis.call('EXISTS', KEYS[i]) == 1 then
    billed[#billed + 1] = KEYS[i]
    slideCap(KEYS[i])
    keepCap(KEYS[i])
    if r[3] == '1' and tenantKeys then
      billed[#billed + 1] = KEYS[n + 1 + i]
      slideOwn(KEYS[n + 1 + i])
    end
  end
end
if spec.op == 'answered' then
  -- The provider answered the call with an error (a 429 or 5xx): its account counted the
  -- request, not its tokens; `requests` of them when it answered that many attempts (retries).
  local extra = math.max(0, (tonumber(spec.requests) or 1) - 1)
  for _, key in ipairs(billed) do
    billCap(key, bucket, -tokens, extra)
  end
  return {'answered'}
end
if spec.op == 'release' then
  -- The upstream never took the call: it counted nothing.
  for _, key in ipairs(billed) do
    billCap(key, bucket, -tokens, -1)
  end
  return {'released'}
end
if counting == 'usage' then
  for _, key in ipairs(billed) do
    billCap(key, bucket, spec.usage - tokens, 0)
  end
end
return {'settled'}
