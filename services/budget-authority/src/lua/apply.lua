-- apply: one atomic write of a config apply (write-apply.ts): the config, its version and
-- config.changed event, the declared document and the file record, each only when it changes.
-- Writes only if the version and the declared document are still the ones the caller read.
--
-- KEYS[1]  config version       KEYS[2]  config          KEYS[3]  the system org's outbox
-- KEYS[4]  org registry (set)   KEYS[5]  declared hash   KEYS[6]  config file record
-- ARGV[1]  the version read
-- ARGV[2]  the declared hash read ('': none yet; '*': not checked, an edit)
-- ARGV[3]  the config document ('': unchanged)
-- ARGV[4]  the config.changed event's outbox fields (JSON list)
-- ARGV[5]  the config's orgs (JSON list)
-- ARGV[6]  the declared hash, ARGV[7] its record ('': unchanged)
-- ARGV[8]  the config file record ('': unchanged)
--
-- Returns the version after the write, or -1 when something moved.

if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return -1 end
if ARGV[2] ~= '*' and (redis.call('HGET', KEYS[5], 'hash') or '') ~= ARGV[2] then return -1 end
local version = tonumber(ARGV[1])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[3])
  version = redis.call('INCR', KEYS[1])
  redis.call('XADD', KEYS[3], '*', unpack(cjson.decode(ARGV[4])))
  local orgs = cjson.decode(ARGV[5])
  if #orgs > 0 then redis.call('SADD', KEYS[4], unpack(orgs)) end
end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[5], 'hash', ARGV[6], 'record', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('SET', KEYS[6], ARGV[8]) end
return version
