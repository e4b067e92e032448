-- The state of each budget window after each event (events carry `windows`): one row per
-- (event, window). `level` is the tenant the budget belongs to (the team or an org above it).
-- Amounts are tokens, or micro-USD when `budget_unit` is 'usd'. Fed by a projecting
-- materialized view into a table keyed by (event, window); read with FINAL.
CREATE TABLE IF NOT EXISTS {{db}}.window_states_v1
(
    event_id String,
    event_type String,
    ts DateTime('UTC'),
    time_ms UInt64,
    tenant String,
    level String,
    budget String,
    budget_window String,
    budget_unit String,
    budget_limit Int64,
    used Int64,
    held Int64,
    enforce UInt8
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (level, budget, ts, event_id)
SETTINGS index_granularity = 8192;

CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.window_states_mv_v1 TO {{db}}.window_states_v1
AS SELECT
    id AS event_id,
    type AS event_type,
    ts,
    time_ms,
    tenant,
    wl AS level,
    wb AS budget,
    ww AS budget_window,
    wu AS budget_unit,
    wlim AS budget_limit,
    wused AS used,
    wheld AS held,
    wenf AS enforce
FROM {{db}}.events_raw_v1
ARRAY JOIN
    w_level AS wl,
    w_budget AS wb,
    w_window AS ww,
    w_unit AS wu,
    w_limit AS wlim,
    w_used AS wused,
    w_held AS wheld,
    w_enforce AS wenf
