-- claim: takes or renews an org's relay lease (outbox-relay.ts).
--
-- KEYS[1]  the org's relay lock   ARGV[1]  this replica's id   ARGV[2]  lease (ms)
--
-- Returns 1 when this replica holds the lease now, 0 when another one does.

local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if owner then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
