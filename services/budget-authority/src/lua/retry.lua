-- retry: whether a retry of a call may take a request of an upstream (capacity.retry): only a
-- live hold of the tenant and model named, on the upstream its capacity is on, read in the
-- hold's own record in the org's slot (the capacity windows are in the upstream's slot:
-- capacity.ts takes the request there after this step, and undoes the count when the
-- upstream has none left), then records the retry taken: its `reservation.retried`, written in
-- the org's outbox while the hold is live (a rebuild counts it in its second, the call still in
-- flight). The record's `rq`: the retries counted, which its close writes into its event
-- (`retryRequests`): a rebuild counts there those no `reservation.retried` recorded.
--
-- KEYS[1]  the reservation hash
-- KEYS[2]  the org's outbox stream (record)
-- ARGV[1]  op: 'count' | 'undo' | 'record'
-- ARGV[2]  count: now ('': Redis TIME; a test clock's instant); record: the
--          reservation.retried event's fields (name, value, ...) from here
-- ARGV[3]  tenant   ARGV[4]  model   ARGV[5]  upstream (count)
--
-- Returns count: {'counted'}, {'closed', state} (no live hold: settled, released, expired,
--         its lease past; '' unknown), or {'other', what, value} (what: 'tenant', 'model' or
--         'upstream', the hold's, not the one named; nothing counted); undo: {'undone'};
--         record: {'recorded'}, or {'closed', state} (closed since the count: its close's
--         `retryRequests` carries the retry, no event is written)

local f = redis.call('HMGET', KEYS[1], 'state', 'r', 'tenant', 'model', 'up', 'expiresAt')
local state = f[1]

if ARGV[1] == 'undo' then
  if state == 'held' then
    redis.call('HINCRBY', KEYS[1], 'rq', -1)
  end
  return {'undone'}
end
if ARGV[1] == 'record' then
  if state ~= 'held' then
    return {'closed', state or ''}
  end
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
  return {'recorded'}
end
if state ~= 'held' then
  return {'closed', state or ''}
end
local now = clockNow({now = tonumber(ARGV[2])})
if tonumber(f[6] or '0') <= now then
  return {'closed', 'expired'}
end
-- The record's fixed fields, or fields of their own in a record written before `r`.
local tenant, model = f[3], f[4]
if f[2] then
  local x = recordFixed(KEYS[1], f[2])
  tenant, model = x[1], x[5]
end
if tenant ~= ARGV[3] then
  return {'other', 'tenant', tenant or ''}
end
if model ~= ARGV[4] then
  return {'other', 'model', model or ''}
end
-- `up` absent: admitted before admissions recorded it, never moved (the edge's word stands).
if f[5] and f[5] ~= ARGV[5] then
  return {'other', 'upstream', f[5]}
end
redis.call('HINCRBY', KEYS[1], 'rq', 1)
return {'counted'}
