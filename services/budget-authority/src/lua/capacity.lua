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
-- KEYS[n+1]   the reservation's capacity record (bucket, tokens), kept 2 minutes
-- ARGV[1]     spec (JSON): op ('take' | 'settle' | 'release' | 'report' | 'peek'), limits
--             [[tokensPerMinute, requestsPerMinute], ...] (0: no limit), share, tokens,
--             usage (settle; counting 'usage' only), counting ('requested' | 'usage'),
--             retryAfterMs, remainingTokens, resetMs (report); `now` under a test clock
--
-- Returns take: {'ok'} or {'full', retryAfterSeconds, scope (1-based), used, limit}
--         settle/release: {'settled' | 'released' | 'unknown'}; report: {'reported'};
--         peek: {'tokens,requests,blockedUntil' per scope}

local spec = cjson.decode(ARGV[1])
local now = clockNow(spec)
local n = #spec.limits
local record = KEYS[n + 1]
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

if spec.op == 'take' then
  if redis.call('EXISTS', record) == 1 then
    return {'ok'} -- a retried admit: taken already
  end
  for i = 1, n do
    local key, lim = KEYS[i], spec.limits[i]
    local st, sr = slideCap(key)
    local f = redis.call('HMGET', key, 'blockedUntil', 'shrunkLimit', 'shrunkUntil')
    local blocked = tonumber(f[1]) or 0
    if blocked > now then
      return {'full', I(math.max(1, math.ceil((blocked - now) / 1000))), I(i), I(st), I(lim[1])}
    end
    local tpm = lim[1]
    if tonumber(f[3] or '0') > now and tpm > 0 then
      tpm = math.min(tpm, tonumber(f[2]))
    end
    local allowedT = math.floor(tpm * spec.share)
    local allowedR = math.floor(lim[2] * spec.share)
    local waitT = (tpm > 0) and waitFor(key, 't', st, spec.tokens, allowedT) or 0
    local waitR = (lim[2] > 0) and waitFor(key, 'r', sr, 1, allowedR) or 0
    if waitT > 0 or waitR > 0 then
      return {'full', I(math.max(waitT, waitR)), I(i), I(st), I(tpm)}
    end
  end
  for i = 1, n do
    billCap(KEYS[i], current, spec.tokens, 1)
  end
  redis.call('HSET', record, 'bucket', I(current), 'tokens', I(spec.tokens))
  redis.call('PEXPIRE', record, 120000)
  return {'ok'}
end

if spec.op == 'peek' then
  -- What the last minute used of each scope (the status page).
  local out = {}
  for i = 1, n do
    local st, sr = slideCap(KEYS[i])
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
  end
  return {'reported'}
end

local r = redis.call('HMGET', record, 'bucket', 'tokens')
if not r[1] then
  return {'unknown'}
end
local bucket, tokens = tonumber(r[1]), tonumber(r[2])
redis.call('DEL', record)
for i = 1, n do
  slideCap(KEYS[i])
end
if spec.op == 'release' then
  -- The upstream never took the call: it counted nothing.
  for i = 1, n do
    billCap(KEYS[i], bucket, -tokens, -1)
  end
  return {'released'}
end
if spec.counting == 'usage' then
  for i = 1, n do
    billCap(KEYS[i], bucket, spec.usage - tokens, 0)
  end
end
return {'settled'}
