-- Usage per surface (api) with every token category, per hour and per UTC day: the books of
-- each surface, and what cache reads, cache writes and reasoning cost. Amounts are what the
-- windows were charged (as usage_hourly_v1, which keeps its columns); the category columns
-- come from settled events. Rows written before migration 011 have api ''.
CREATE VIEW IF NOT EXISTS {{db}}.usage_by_api_hourly_v1
AS SELECT
    toStartOfHour(ts) AS hour,
    tenant,
    org,
    use_case,
    model,
    api,
    countIf(type = 'reservation.settled') AS calls,
    countIf(type = 'reservation.released') AS released,
    countIf(type = 'reservation.expired') AS expired,
    sumIf(prompt_tokens, type = 'reservation.settled') AS prompt_tokens_total,
    sumIf(cached_prompt_tokens, type = 'reservation.settled') AS cached_prompt_tokens_total,
    sumIf(cache_write_5m_tokens, type = 'reservation.settled') AS cache_write_5m_tokens_total,
    sumIf(cache_write_1h_tokens, type = 'reservation.settled') AS cache_write_1h_tokens_total,
    sumIf(completion_tokens, type = 'reservation.settled') AS completion_tokens_total,
    sumIf(reasoning_tokens, type = 'reservation.settled') AS reasoning_tokens_total,
    sum(charged_tokens) AS tokens,
    sum(charged_micro_usd) AS cost_micro_usd_total,
    sum(charged_micro_usd) / 1000000 AS cost_usd
FROM {{db}}.events_raw_v1 FINAL
WHERE type IN ('reservation.created', 'reservation.settled', 'reservation.released', 'reservation.expired')
GROUP BY hour, tenant, org, use_case, model, api;

CREATE VIEW IF NOT EXISTS {{db}}.usage_by_api_daily_v1
AS SELECT
    toDate(hour) AS day,
    tenant,
    org,
    use_case,
    model,
    api,
    sum(calls) AS calls_day,
    sum(released) AS released_day,
    sum(expired) AS expired_day,
    sum(prompt_tokens_total) AS prompt_tokens_day,
    sum(cached_prompt_tokens_total) AS cached_prompt_tokens_day,
    sum(cache_write_5m_tokens_total) AS cache_write_5m_tokens_day,
    sum(cache_write_1h_tokens_total) AS cache_write_1h_tokens_day,
    sum(completion_tokens_total) AS completion_tokens_day,
    sum(reasoning_tokens_total) AS reasoning_tokens_day,
    sum(tokens) AS tokens_day,
    sum(cost_micro_usd_total) AS cost_micro_usd_day,
    sum(cost_micro_usd_total) / 1000000 AS cost_usd_day
FROM {{db}}.usage_by_api_hourly_v1
GROUP BY day, tenant, org, use_case, model, api
