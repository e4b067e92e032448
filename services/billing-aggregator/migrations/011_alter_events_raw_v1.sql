-- The surface a call came in on and the token categories that are priced on their own:
-- - api: chat | responses | messages | embeddings ('' on rows written before this migration,
--   and on events that are not about a call);
-- - cache_write_5m_tokens, cache_write_1h_tokens: prompt tokens written to the provider's
--   cache (Anthropic's 5-minute and 1-hour rates), parts of prompt_tokens as cached ones are;
-- - reasoning_tokens: part of completion_tokens (billed as output).
-- Every insert sends every column (measured on ClickHouse 18.16: an omitted JSONEachRow field gets its type's zero).
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists, so the
-- file can run twice (a migration interrupted halfway, two replicas at once).
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN api String;
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN cache_write_5m_tokens UInt32;
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN cache_write_1h_tokens UInt32;
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN reasoning_tokens UInt32;
