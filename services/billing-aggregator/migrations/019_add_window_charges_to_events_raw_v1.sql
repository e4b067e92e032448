-- What the event added to each of its windows' `used`, parallel to the other w_* arrays
-- (`windowCharge` of @holdfast/events): the window's own `charged` where the event has one (a
-- close charges a budget added while the call was in flight otherwise: a settle the whole
-- usage, an expiry nothing), else the event's charged_tokens, or charged_micro_usd for a usd
-- window. So a sum over the arrays is each window's charge, exactly.
-- Empty on rows written before this migration: read charged_tokens / charged_micro_usd there.
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN w_charged Array(Int64);
