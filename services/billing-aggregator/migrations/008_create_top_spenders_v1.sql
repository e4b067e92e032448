-- Spend per tenant and key over the last 30 days, largest first. Sum over key_id for a
-- per-tenant ranking (example queries in docs/clickhouse.md).
CREATE VIEW IF NOT EXISTS {{db}}.top_spenders_v1
AS SELECT
    tenant,
    org,
    key_id,
    count() AS calls,
    sum(billed_tokens) AS tokens,
    sum(cost_micro_usd) AS cost_micro_usd_total,
    sum(cost_micro_usd) / 1000000 AS cost_usd,
    min(ts) AS first_call,
    max(ts) AS last_call
FROM {{db}}.events_raw_v1 FINAL
WHERE type = 'reservation.settled' AND ts >= now() - INTERVAL 30 DAY
GROUP BY tenant, org, key_id
ORDER BY cost_micro_usd_total DESC, tokens DESC, tenant, key_id
