-- The provider-run tools a call used that are billed per use (web search, file search, code
-- interpreter, web fetch), priced at the model's price.toolUses, on reservation.settled:
-- - tool_uses: the uses the provider reported, all tools together;
-- - tool_fee_micro_usd: what they cost, micro-USD: part of cost_micro_usd.
-- 0 on other events and on rows written before this migration (no tool fee was billed).
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN tool_uses UInt32;
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN tool_fee_micro_usd UInt64;
