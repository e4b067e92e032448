-- Tokens and cost per UTC day by tenant / use case / model: usage_hourly_v1 summed by day.
CREATE VIEW IF NOT EXISTS {{db}}.usage_daily_v1
AS SELECT
    toDate(hour) AS day,
    tenant,
    org,
    use_case,
    model,
    sum(calls) AS calls_day,
    sum(released) AS released_day,
    sum(expired) AS expired_day,
    sum(prompt_tokens_total) AS prompt_tokens_day,
    sum(completion_tokens_total) AS completion_tokens_day,
    sum(cached_prompt_tokens_total) AS cached_prompt_tokens_day,
    sum(tokens) AS tokens_day,
    sum(cost_micro_usd_total) AS cost_micro_usd_day,
    sum(cost_micro_usd_total) / 1000000 AS cost_usd_day
FROM {{db}}.usage_hourly_v1
GROUP BY day, tenant, org, use_case, model
