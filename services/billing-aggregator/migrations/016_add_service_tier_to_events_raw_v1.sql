-- The service tier of a call (OpenAI `service_tier`, Anthropic's Priority Tier), each priced
-- at the model's price for it (price.serviceTiers; `default` is the base price):
-- - on reservation.settled: the tier billed (the one the provider reported serving it at
--   when the model prices it, else the tier held);
-- - on reservation.created: the tier held (the dearest the call may be served at).
-- '' on other events and on rows written before this migration (their settlements billed
-- the base price: read '' as `default`).
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN service_tier String;
