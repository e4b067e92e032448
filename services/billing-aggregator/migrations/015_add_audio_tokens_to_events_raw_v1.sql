-- The audio parts of a call's usage, each billed at the model's audio price
-- (audioInputPerMTok, audioOutputPerMTok; the text prices when the model has none):
-- - audio_prompt_tokens: part of prompt_tokens (Chat Completions `input_audio` parts);
-- - audio_completion_tokens: part of completion_tokens (`modalities: ["audio"]` output).
-- 0 on rows written before this migration and on events that are not a settlement.
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN audio_prompt_tokens UInt32;
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN audio_completion_tokens UInt32;
