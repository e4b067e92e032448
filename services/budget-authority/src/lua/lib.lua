-- Shared helpers, prepended to every script by scripts.ts (Redis has no `require`).
--
-- Amounts are integers (tokens or micro-USD) held in Lua doubles: exact below 2^53. They are
-- always written with I(), because Redis formats a Lua number with "%.14g" and would round
-- anything above 1e14.

local function I(n)
  return string.format('%d', n)
end

-- Window hash layout: s = billed sum inside the window, h = held, p = overrun that adaptive
-- calls whose hold cannot grow could still make, lo = oldest live bucket, b<index> = billed
-- amount of one bucket.
--
-- Slides a window to `start` (oldest bucket still inside it): drops older buckets and
-- subtracts them from the sum. Returns the sum, the held amount and the potential overrun.
local function slide(key, start, nb)
  local v = redis.call('HMGET', key, 's', 'h', 'lo', 'p')
  local s = tonumber(v[1]) or 0
  local h = tonumber(v[2]) or 0
  local lo = tonumber(v[3])
  local p = tonumber(v[4]) or 0
  if lo == nil then
    redis.call('HSET', key, 'lo', I(start))
    return s, h, p
  end
  if lo < start then
    if start - lo >= nb then
      -- Idle longer than the window: every bucket has left it.
      redis.call('DEL', key)
      s = 0
      redis.call('HSET', key, 'h', I(h), 's', '0', 'p', I(p))
    else
      for b = lo, start - 1 do
        local f = 'b' .. I(b)
        local x = redis.call('HGET', key, f)
        if x then
          s = s - tonumber(x)
          redis.call('HDEL', key, f)
        end
      end
      redis.call('HSET', key, 's', I(s))
    end
    redis.call('HSET', key, 'lo', I(start))
  end
  return s, h, p
end

-- Bills `amount` (may be negative) into the current bucket of a window.
local function bill(key, cur, amount)
  if amount ~= 0 then
    redis.call('HINCRBY', key, 'b' .. I(cur), I(amount))
    redis.call('HINCRBY', key, 's', I(amount))
  end
end

-- Changes a window's held amount (field 'h') or potential overrun ('p'), never below zero.
local function hold(key, amount, field)
  field = field or 'h'
  if amount ~= 0 then
    local h = redis.call('HINCRBY', key, field, I(amount))
    if h < 0 then
      redis.call('HSET', key, field, '0')
    end
  end
end

-- Bounds of a budget's window, from the table the caller computed for `now`.
local function bounds(spec, b)
  local kind = b.window
  if kind == 'month' and b.calendar then
    kind = 'calmonth'
  end
  return spec.bounds[kind]
end

-- Cost in micro-USD (rounded up) of tokens at integer pico-USD per token prices.
local function cost(input, cached, output, price)
  local pico = (input - cached) * price[1] + cached * price[3] + output * price[2]
  local micro = math.floor(pico / 1000000)
  if micro * 1000000 < pico then
    micro = micro + 1
  end
  return micro
end

-- One window's state for replies and events: tenant,budget,limit,used,held,enforce
local function windowState(b, s, h)
  return b.tenant .. ',' .. b.id .. ',' .. I(b.limit) .. ',' .. I(s) .. ',' .. I(h) .. ',' .. (b.enforce and '1' or '0')
end

-- Slides every budget of the plan and returns their states joined by ';'.
local function windowStates(spec)
  local out = {}
  for i, b in ipairs(spec.budgets) do
    local bd = bounds(spec, b)
    local s, h = slide(KEYS[b.key], bd[2], bd[3])
    out[i] = windowState(b, s, h)
  end
  return table.concat(out, ';')
end

-- Appends an event to the org's outbox (KEYS[1]); the relay publishes it to JetStream.
local function emit(fields)
  redis.call('XADD', KEYS[1], '*', unpack(fields))
end

-- Reservation records name the windows they hold on compactly, so the record stays a small
-- listpack hash: levels as "team;org", holds as "<level index><window><unit>" per budget
-- ("0Mt" = level 0's month-tokens window). Keys are rebuilt from the prefix and the org.
local WINDOW_CODE = {minute = 'm', day = 'd', month = 'M'}
local WINDOW_NAME = {m = 'minute', d = 'day', M = 'month'}
local UNIT_CODE = {tokens = 't', usd = 'u'}
local UNIT_NAME = {t = 'tokens', u = 'usd'}

local function tenantKey(spec, tenant, suffix)
  return spec.kp .. ':{' .. spec.org .. '}:t:' .. tenant .. suffix
end

-- The record's levels: list of tenant ids, leaf first.
local function recordLevels(text)
  local out = {}
  for t in string.gmatch(text or '', '[^;]+') do
    out[#out + 1] = t
  end
  return out
end

-- The record's holds: list of {window key, unit}.
local function recordHolds(spec, levels, text)
  local out = {}
  for code in string.gmatch(text or '', '[^;]+') do
    local level = levels[tonumber(string.sub(code, 1, -3)) + 1]
    local window = WINDOW_NAME[string.sub(code, -2, -2)]
    local unit = UNIT_NAME[string.sub(code, -1)]
    out[#out + 1] = {tenantKey(spec, level, ':w:' .. window .. '-' .. unit), unit}
  end
  return out
end
