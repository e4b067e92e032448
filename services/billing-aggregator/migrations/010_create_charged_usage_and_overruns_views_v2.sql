-- Usage totals become what the windows were charged (`charged_*`), the same figures the drift
-- audit and the authority's counters use, so the dashboards agree with the ledger to the token:
-- - an expired hold nobody settled (its edge died mid-call) is billed at its worst case by
--   reserve's `onExpiry: bill`; its `reservation.expired` event carries that charge, and a
--   settle that arrives later charges the difference (negative when the call used less);
-- - estimate mode charges the prompt at admission (`reservation.created`).
-- Summing `billed_tokens` of settled events alone showed neither. Call counts and the prompt
-- and completion columns still come from settled events.
-- Refusals are summed by their `count` (a refusal event past a tenant's event rate stands for
-- `count` refusals; it is kept in `extra`, 1 when absent). Overruns get a view of their own.
-- Every view keeps its name and columns; every statement can run twice.
DROP TABLE IF EXISTS {{db}}.usage_daily_v1;
DROP TABLE IF EXISTS {{db}}.usage_hourly_v1;
DROP TABLE IF EXISTS {{db}}.top_spenders_v1;
DROP TABLE IF EXISTS {{db}}.refusals_by_reason_v1;

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
    sumIf(prompt_tokens, type = 'reservation.settled') AS prompt_tokens_total,
    sumIf(completion_tokens, type = 'reservation.settled') AS completion_tokens_total,
    sumIf(cached_prompt_tokens, type = 'reservation.settled') AS cached_prompt_tokens_total,
    sum(charged_tokens) AS tokens,
    sum(charged_micro_usd) AS cost_micro_usd_total,
    sum(charged_micro_usd) / 1000000 AS cost_usd
FROM {{db}}.events_raw_v1 FINAL
WHERE type IN ('reservation.created', 'reservation.settled', 'reservation.released', 'reservation.expired')
GROUP BY hour, tenant, org, use_case, model;

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
GROUP BY day, tenant, org, use_case, model;

-- Spend per tenant and key over the last 30 days, largest first.
CREATE VIEW IF NOT EXISTS {{db}}.top_spenders_v1
AS SELECT
    tenant,
    org,
    key_id,
    countIf(type = 'reservation.settled') AS calls,
    sum(charged_tokens) AS tokens,
    sum(charged_micro_usd) AS cost_micro_usd_total,
    sum(charged_micro_usd) / 1000000 AS cost_usd,
    min(ts) AS first_call,
    max(ts) AS last_call
FROM {{db}}.events_raw_v1 FINAL
WHERE type IN ('reservation.created', 'reservation.settled', 'reservation.released', 'reservation.expired')
    AND ts >= now() - INTERVAL 30 DAY
GROUP BY tenant, org, key_id
ORDER BY cost_micro_usd_total DESC, tokens DESC, tenant, key_id;

-- Refusals per hour by tenant / use case / model and reason (the refusal code). `shadow = 1`:
-- refusals a shadow budget would have made (those calls were admitted).
CREATE VIEW IF NOT EXISTS {{db}}.refusals_by_reason_v1
AS SELECT
    toStartOfHour(ts) AS hour,
    tenant,
    org,
    use_case,
    model,
    code AS reason,
    shadow,
    sum(if(visitParamExtractUInt(extra, 'count') = 0, 1, visitParamExtractUInt(extra, 'count'))) AS refusals,
    sum(needed_tokens) AS needed_tokens_total,
    sum(needed_micro_usd) AS needed_micro_usd_total
FROM {{db}}.events_raw_v1 FINAL
WHERE type = 'admission.refused'
GROUP BY hour, tenant, org, use_case, model, reason, shadow;

-- Settlements that billed more than their hold (`reservation.overrun`), per hour: how many and
-- by how much, in tokens and micro-USD. The excess is already in the usage views (the truth was
-- billed); this says where the counting or the upstream let it through.
CREATE VIEW IF NOT EXISTS {{db}}.overruns_v1
AS SELECT
    toStartOfHour(ts) AS hour,
    tenant,
    org,
    use_case,
    model,
    count() AS overruns,
    sum(visitParamExtractUInt(extra, 'overrunTokens')) AS overrun_tokens,
    sum(visitParamExtractUInt(extra, 'overrunMicroUsd')) AS overrun_micro_usd,
    sum(billed_tokens) AS billed_tokens_total,
    sum(held_tokens) AS held_tokens_total
FROM {{db}}.events_raw_v1 FINAL
WHERE type = 'reservation.overrun'
GROUP BY hour, tenant, org, use_case, model;
