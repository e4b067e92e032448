-- Tokens and cost per UTC day by tenant / use case / model (same measures as usage_hourly_v1).
CREATE VIEW IF NOT EXISTS {{db}}.usage_daily_v1
AS SELECT
    toDate(ts) AS day,
    tenant,
    org,
    use_case,
    model,
    countIf(type = 'reservation.settled') AS calls,
    countIf(type = 'reservation.released') AS released,
    countIf(type = 'reservation.expired') AS expired,
    sum(prompt_tokens) AS prompt_tokens_total,
    sum(completion_tokens) AS completion_tokens_total,
    sum(cached_prompt_tokens) AS cached_prompt_tokens_total,
    sum(billed_tokens) AS tokens,
    sum(cost_micro_usd) AS cost_micro_usd_total,
    sum(cost_micro_usd) / 1000000 AS cost_usd
FROM {{db}}.events_raw_v1 FINAL
WHERE type IN ('reservation.settled', 'reservation.released', 'reservation.expired')
GROUP BY day, tenant, org, use_case, model
