#!lua name=floor
-- The floor's two scripts (floor/authority.ts): the least an admit and a settle can do in one
-- atomic step. Three sliding windows (team month tokens, team day USD, org month USD), each in
-- buckets; every window checked, the hold written, the event written to the outbox.
--
-- KEYS[1] the org's windows hash, KEYS[2] the call's hold, KEYS[3] the org's outbox stream.
-- Window i (1..3) keeps in KEYS[1]: s<i> the sum of its live buckets, h<i> what is held on it,
-- l<i> its oldest live bucket, b<i>.<n> bucket n's usage.
--
-- ARGV[1] now (ms); ARGV[2..10] each window's limit, bucket width (ms) and bucket count;
-- ARGV[11..13] the windows' names; ARGV[14] the event's id; ARGV[15] the reservation id;
-- ARGV[16] the hold's lease (ms); ARGV[17] the event's fixed fields (JSON members: tenant, key,
-- use case, model); ARGV[18] its per-call fields; ARGV[19..21] the amount for each window
-- (admit: to hold; settle: to bill); ARGV[22] the event's subject.

-- Set by each function on entry: the helpers below read them.
local KEYS, ARGV

local FIELDS = { 's1', 'h1', 'l1', 's2', 'h2', 'l2', 's3', 'h3', 'l3' }

-- Reads the three windows (and, with `buckets`, the bucket each bills now) and slides each
-- to now: buckets that fell out of it are dropped and taken off its sum.
local function windows(key, now, buckets)
  local cur, fields = {}, FIELDS
  if buckets then
    fields = { unpack(FIELDS) }
  end
  for i = 1, 3 do
    cur[i] = math.floor(now / ARGV[i * 3])
    if buckets then
      fields[9 + i] = 'b' .. i .. '.' .. cur[i]
    end
  end
  local v = redis.call('HMGET', key, unpack(fields))
  local w = { s = {}, h = {}, lo = {}, b = {}, cur = cur, moved = {} }
  for i = 1, 3 do
    local s, h = (tonumber(v[i * 3 - 2]) or 0), (tonumber(v[i * 3 - 1]) or 0)
    local lo = tonumber(v[i * 3])
    local count = tonumber(ARGV[i * 3 + 1])
    local first = cur[i] - count + 1
    if not lo then
      lo = cur[i]
      w.moved[i] = true
    elseif lo < first then
      local gone = {}
      for n = lo, math.min(first - 1, lo + count - 1) do
        gone[#gone + 1] = 'b' .. i .. '.' .. n
      end
      local old = redis.call('HMGET', key, unpack(gone))
      for k = 1, #old do
        s = s - (tonumber(old[k]) or 0)
      end
      redis.call('HDEL', key, unpack(gone))
      lo = first
      w.moved[i] = true
    end
    w.s[i], w.h[i], w.lo[i] = s, h, lo
    if buckets then
      w.b[i] = tonumber(v[9 + i]) or 0
    end
  end
  return w
end

local function int(x)
  return string.format('%d', x)
end

-- The event, as JSON: its fixed and per-call fields, and every window after the change.
local function event(kind, w)
  local ws = {}
  for i = 1, 3 do
    ws[i] = '{"budget":"' .. ARGV[10 + i] .. '","limit":' .. ARGV[i * 3 - 1] .. ',"used":'
      .. int(w.s[i]) .. ',"held":' .. int(w.h[i]) .. '}'
  end
  return '{"id":"' .. ARGV[14] .. '","type":"' .. kind .. '","time":' .. ARGV[1]
    .. ',"reservationId":"' .. ARGV[15] .. '",' .. ARGV[17] .. ',' .. ARGV[18]
    .. ',"windows":[' .. table.concat(ws, ',') .. ']}'
end

local function emit(kind, w)
  redis.call('XADD', KEYS[3], '*', 's', ARGV[22], 'i', ARGV[14], 'e', event(kind, w))
end

-- The window fields a change writes: each window's held; its sum when billed or slid; the
-- bucket billed; its oldest bucket when it slid.
local function write(key, w, billed)
  local set = {}
  for i = 1, 3 do
    set[#set + 1] = 'h' .. i
    set[#set + 1] = int(w.h[i])
    if billed or w.moved[i] then
      set[#set + 1] = 's' .. i
      set[#set + 1] = int(w.s[i])
    end
    if billed then
      set[#set + 1] = 'b' .. i .. '.' .. w.cur[i]
      set[#set + 1] = int(w.b[i])
    end
    if w.moved[i] then
      set[#set + 1] = 'l' .. i
      set[#set + 1] = int(w.lo[i])
    end
  end
  redis.call('HSET', key, unpack(set))
end

-- {1} admitted, {0, i} refused by window i, {2} a reservation of that id exists already.
local function admit(keys, args)
  KEYS, ARGV = keys, args
  local now = tonumber(ARGV[1])
  local w = windows(KEYS[1], now, false)
  local amount = {}
  for i = 1, 3 do
    amount[i] = tonumber(ARGV[18 + i])
    if w.s[i] + w.h[i] + amount[i] > tonumber(ARGV[i * 3 - 1]) then
      return { 0, i }
    end
  end
  local held = ARGV[19] .. ' ' .. ARGV[20] .. ' ' .. ARGV[21]
  if not redis.call('SET', KEYS[2], held, 'NX', 'PX', ARGV[16]) then
    return { 2 }
  end
  for i = 1, 3 do
    w.h[i] = w.h[i] + amount[i]
  end
  write(KEYS[1], w, false)
  emit('reservation.created', w)
  return { 1 }
end

-- {1} settled, {0} no such hold (settled already, or expired).
local function settle(keys, args)
  KEYS, ARGV = keys, args
  local held = redis.call('GETDEL', KEYS[2])
  if not held then
    return { 0 }
  end
  local a1, a2, a3 = string.match(held, '^(%d+) (%d+) (%d+)$')
  local amount = { tonumber(a1), tonumber(a2), tonumber(a3) }
  local w = windows(KEYS[1], tonumber(ARGV[1]), true)
  for i = 1, 3 do
    local billed = tonumber(ARGV[18 + i])
    w.h[i] = w.h[i] - amount[i]
    w.s[i] = w.s[i] + billed
    w.b[i] = w.b[i] + billed
  end
  write(KEYS[1], w, true)
  emit('reservation.settled', w)
  return { 1 }
end

redis.register_function('floor_admit', admit)
redis.register_function('floor_settle', settle)
