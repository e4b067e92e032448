-- move: where a live hold's upstream capacity is (capacity.move), compared and set in the
-- hold's own record, in the org's slot (the capacity windows are in the upstreams' slots:
-- capacity-move.ts runs its steps around this one). The record's fields: `up`, the upstream
-- whose capacity the call holds: the one its admission took (admit.lua; '': it took none),
-- then its last move's `to` ('': one that declares none; absent: a hold admitted before
-- admissions recorded it); `mf`, the upstream that move left ('': none); `mr` '1', that
-- move's reservation.moved is written; `mp` '1', that move is claimed and not recorded (the
-- hold's close gives back the upstream it leaves and the fallback: close.lua).
--
-- KEYS[1]  the reservation hash
-- KEYS[2]  the org's outbox stream (record)
-- ARGV[1]  op: 'claim' | 'undo' | 'record'
-- ARGV[2]  from ('': the call holds no upstream's capacity)
-- ARGV[3]  to
-- ARGV[4]  claim and undo: the upstreams `from` '' stands for too (the model's that declare no
--          capacity: the edge names none after a move there), ','-joined
-- ARGV[5..] record: the reservation.moved event's fields (name, value, ...)
--
-- Returns claim: {'claimed', from} (the hold was on `from`, or on one it stands for, returned:
--         it is on `to` now), {'again', from} (this move was claimed before: asked again),
--         {'closed', state} (no live hold), or {'elsewhere', up} (the hold is on another
--         upstream than `from`); undo: {'undone'} or {'kept'} (the hold is not on `to` by this
--         move); record (`from` as claim returned it): {'recorded'} (written now or before),
--         {'closed', state} (the hold closed since the claim: its close gave back the upstream
--         left, nothing is recorded) or {'elsewhere', up} (the hold is no longer on `to` by
--         this move).

local op, from, to = ARGV[1], ARGV[2], ARGV[3]
local f = redis.call('HMGET', KEYS[1], 'state', 'up', 'mf')
local state, up, mf = f[1], f[2], f[3]
local stands = {}
if from == '' and op ~= 'record' then
  for id in string.gmatch(ARGV[4], '[^,]+') do
    stands[id] = true
  end
end
local function isFrom(x)
  return x == from or (from == '' and stands[x] == true)
end
-- This move is the hold's last one (claimed, not undone).
local mine = up == to and mf ~= false and isFrom(mf)

if op == 'claim' then
  if state ~= 'held' then
    return {'closed', state or ''}
  end
  if mine then
    return {'again', mf}
  end
  -- A hold admitted before admissions recorded `up` and never moved: the edge's word for it.
  if up ~= false and not isFrom(up) then
    return {'elsewhere', up}
  end
  local left = up or from
  redis.call('HSET', KEYS[1], 'up', to, 'mf', left, 'mp', '1')
  redis.call('HDEL', KEYS[1], 'mr')
  return {'claimed', left}
end

if op == 'undo' then
  -- The fallback had no room: the hold is back on the upstream it was on.
  if not mine then
    return {'kept'}
  end
  redis.call('HSET', KEYS[1], 'up', mf)
  redis.call('HDEL', KEYS[1], 'mf', 'mr', 'mp')
  return {'undone'}
end

if state ~= 'held' then
  -- Closed since the claim (the close gave back the upstream left and the fallback): a move
  -- recorded now would put a closed call on the fallback.
  return {'closed', state or ''}
end
if not mine then
  return {'elsewhere', up or ''}
end
if redis.call('HGET', KEYS[1], 'mr') ~= '1' then
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, 5))
  redis.call('HSET', KEYS[1], 'mr', '1')
  redis.call('HDEL', KEYS[1], 'mp')
end
return {'recorded'}
