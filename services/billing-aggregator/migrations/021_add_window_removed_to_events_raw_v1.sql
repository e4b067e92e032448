-- 1 for each window a close lists that the tenant's plan no longer has (the event's
-- `removed`: the hold was on it and its budget was removed, or the tenant moved or left the
-- config, while the call was held; its w_limit and w_enforce are 0: it has no limit any more),
-- 0 for the others, parallel to the other w_* arrays. Empty on rows written before this
-- migration (their closes did not list such windows): every window of theirs is a budget's.
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN w_removed Array(UInt8);
