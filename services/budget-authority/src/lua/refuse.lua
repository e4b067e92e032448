-- refuse: records a refusal decided before any budget is read (a use case or model not
-- allowed), rate limited like admit.lua's (lib.lua `refusalWritten`) and stamped with Redis
-- time, so a client with a valid key cannot flood the event stream with these either.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the tenant's state hash (the refusal rate's counters)
-- KEYS[3]  the org's refusal summaries
-- KEYS[4]  with a count only: the report item's marker (keys.ts refusalReport)
-- ARGV[1]  spec (JSON): rate, kind, fields (flat list of the event's fields, `time` among
--          them); `now` only under a test clock; `count`: that many refusals an edge answered
--          itself, counted for the summary, never written one by one (refusals.report)
--
-- Returns 1 when the event was written now, 0 when it was counted for a summary; with a count,
-- 1 when counted now, 0 when the item was counted before.

local spec = cjson.decode(ARGV[1])
local now = clockNow(spec)
local fields = spec.fields
for i = 1, #fields, 2 do
  if fields[i] == 'time' then
    fields[i + 1] = I(now)
  end
end
if spec.count then
  -- Refusals an edge answered itself (a repeat of one admit.lua made, whose kind and fields
  -- these are): counted for the summary only, once per report item (KEYS[4]) however often
  -- the edge sends it again.
  if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', 600000) then
    return 0
  end
  redis.call('HINCRBY', KEYS[3], spec.kind, spec.count)
  redis.call('HSET', KEYS[3], spec.kind .. '|last', cjson.encode(fields))
  return 1
end
if refusalWritten(KEYS[2], KEYS[3], now, spec.rate, spec.kind, fields) then
  redis.call('XADD', KEYS[1], '*', unpack(fields))
  return 1
end
return 0
