-- Tokens and cost per hour by tenant / use case / model, from settled calls (the real usage
-- each call billed). Released and expired reservations are counted, they bill nothing.
-- Aggregate names differ from column names (18.16 resolves `sum(x) AS x` recursively).
CREATE VIEW IF NOT EXISTS {{db}}.usage_hourly_v1
AS SELECT
    toStartOfHour(ts) AS hour,
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
GROUP BY hour, tenant, org, use_case, model
