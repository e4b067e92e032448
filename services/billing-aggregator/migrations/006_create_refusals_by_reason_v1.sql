-- Refusals per hour by tenant / use case / model and reason (the refusal code). `shadow = 1`:
-- refusals a shadow budget would have made (those calls were admitted).
CREATE VIEW IF NOT EXISTS {{db}}.refusals_by_reason_v1
AS SELECT
    toStartOfHour(ts) AS hour,
    tenant,
    org,
    use_case,
    model,
    reason,
    shadow,
    count() AS refusals,
    sum(needed_tokens) AS needed_tokens_total,
    sum(needed_micro_usd) AS needed_micro_usd_total
FROM {{db}}.decisions_v1 FINAL
WHERE decision = 'refuse'
GROUP BY hour, tenant, org, use_case, model, reason, shadow
