-- Admission decisions: one row per `reservation.created` (admit) and `admission.refused`
-- (refuse, with the refusal code as `reason`). `shadow = 1` marks a refusal by a shadow budget:
-- the call was admitted (its own admit row exists), the row says it would have been refused.
--
-- Fed by a materialized view that only projects rows (no aggregation) into a table keyed by
-- event id, so a re-inserted event collapses under FINAL here too. Read with FINAL.
CREATE TABLE IF NOT EXISTS {{db}}.decisions_v1
(
    event_id String,
    ts DateTime('UTC'),
    time_ms UInt64,
    tenant String,
    org String,
    reservation_id String,
    key_id String,
    use_case String,
    model String,
    mode String,
    decision Enum8('admit' = 1, 'refuse' = 2),
    reason String,
    shadow UInt8,
    prompt_tokens UInt32,
    max_tokens UInt32,
    held_tokens UInt64,
    held_micro_usd UInt64,
    needed_tokens UInt64,
    needed_micro_usd UInt64,
    budget String,
    level String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, ts, event_id)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.decisions_mv_v1 TO {{db}}.decisions_v1
AS SELECT
    id AS event_id,
    ts,
    time_ms,
    tenant,
    org,
    reservation_id,
    key_id,
    use_case,
    model,
    mode,
    CAST(if(type = 'admission.refused', 'refuse', 'admit') AS Enum8('admit' = 1, 'refuse' = 2)) AS decision,
    code AS reason,
    shadow,
    prompt_tokens,
    max_tokens,
    held_tokens,
    held_micro_usd,
    needed_tokens,
    needed_micro_usd,
    budget,
    level
FROM {{db}}.events_raw_v1
WHERE type IN ('reservation.created', 'admission.refused')
