-- refuse: records a refusal decided before any budget is read (a use case or model not
-- allowed), rate limited like admit.lua's (lib.lua `refusalWritten`) and stamped with Redis
-- time, so a client with a valid key cannot flood the event stream with these either.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the tenant's state hash (the refusal rate's counters)
-- KEYS[3]  the org's refusal summaries
-- ARGV[1]  spec (JSON): rate, kind, fields (flat list of the event's fields, `time` among
--          them); `now` only under a test clock
--
-- Returns 1 when the event was written now, 0 when it was counted for a summary.

local spec = cjson.decode(ARGV[1])
local now = clockNow(spec)
local fields = spec.fields
for i = 1, #fields, 2 do
  if fields[i] == 'time' then
    fields[i + 1] = I(now)
  end
end
if refusalWritten(KEYS[2], KEYS[3], now, spec.rate, spec.kind, fields) then
  redis.call('XADD', KEYS[1], '*', unpack(fields))
  return 1
end
return 0
