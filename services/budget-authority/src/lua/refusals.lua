-- refusals: writes the refusals an admission rate-limited (admit.lua `refusalWritten`) as one
-- `admission.refused` event per kind with its count, and clears them.
--
-- KEYS[1]  the org's outbox stream
-- KEYS[2]  the org's refusal summaries (hash: kind -> count, kind|last -> the last event's
--          fields as JSON)
-- ARGV     event ids, one per kind this call may write
--
-- Returns the number of kinds written; more remain when it equals #ARGV.

local all = redis.call('HGETALL', KEYS[2])
-- Each kind's last fields, from the one read (no HGET a kind).
local lasts = {}
for i = 1, #all, 2 do
  local field = all[i]
  if string.sub(field, -5) == '|last' then
    lasts[string.sub(field, 1, -6)] = all[i + 1]
  end
end
local written = 0
for i = 1, #all, 2 do
  local kind, value = all[i], all[i + 1]
  if string.sub(kind, -5) ~= '|last' then
    if written >= #ARGV then
      break
    end
    local last = lasts[kind]
    if last then
      local fields = cjson.decode(last)
      for j = 1, #fields, 2 do
        if fields[j] == 'id' then
          fields[j + 1] = ARGV[written + 1]
        end
      end
      fields[#fields + 1] = 'count'
      fields[#fields + 1] = value
      redis.call('XADD', KEYS[1], '*', unpack(fields))
    end
    redis.call('HDEL', KEYS[2], kind, kind .. '|last')
    written = written + 1
  end
end
return written
