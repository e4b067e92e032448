-- Whether a call was priced at its tier's long-context price (price.longContext), 1 or 0:
-- - on reservation.settled: billed long (the provider's input above the billed tier's line);
-- - on reservation.created: held long (the admitted prompt count above the held tier's line).
-- 0 on other events and on rows written before this migration (priced short).
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN long_context UInt8 DEFAULT 0;
