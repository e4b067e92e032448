-- migrate: renames each old key to its new name unless the new one exists (migrate.ts).
--
-- KEYS  pairs: old name, new name
--
-- Returns how many moved.

local moved = 0
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('EXISTS', KEYS[i + 1]) == 0 then
    redis.call('RENAME', KEYS[i], KEYS[i + 1])
    moved = moved + 1
  end
end
return moved
