-- unclaim: hands an org's relay lease over at once (a replica stopping), if still its own.
--
-- KEYS[1]  the org's relay lock   ARGV[1]  this replica's id
--
-- Returns 1 when the lease was dropped, 0 when it was not this replica's.

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
