-- Decisions and window states become plain views, derived when read from events_raw_v1 FINAL.
-- Until now two materialized views (002, 003) projected every inserted block into tables of
-- their own. That ran on every insert: one row per (event, window) sorted and written, and merged
-- later. Measured with the aggregator bench, same runs (docs/benchmarks.md): ClickHouse CPU per
-- event 21.4-22.5 µs with them, 15.6-15.8 µs without; the drain 25.9-28.6k -> 31.8-32.7k events/s.
-- Nothing is lost: both tables only ever held projections of events_raw_v1 rows, and the views
-- give the same rows (test/schema-contract.ts compares them with the rows inserted).
--
-- Readers: `decisions_v2` and `window_states_v2` are views, read without FINAL (the FINAL is
-- inside). The views built on them keep their names and columns (refusals_by_reason_v1,
-- budget_utilisation_v1, budget_utilisation_hourly_v1) and are re-created to read the new ones.
-- Every statement can run twice (a migration interrupted halfway, two replicas at once).
DROP TABLE IF EXISTS {{db}}.decisions_mv_v1;
DROP TABLE IF EXISTS {{db}}.window_states_mv_v1;
DROP TABLE IF EXISTS {{db}}.refusals_by_reason_v1;
DROP TABLE IF EXISTS {{db}}.budget_utilisation_v1;
DROP TABLE IF EXISTS {{db}}.budget_utilisation_hourly_v1;
DROP TABLE IF EXISTS {{db}}.decisions_v1;
DROP TABLE IF EXISTS {{db}}.window_states_v1;

-- One row per `reservation.created` (admit) and `admission.refused` (refuse, the refusal code
-- as `reason`). `shadow = 1`: a shadow budget would have refused; the call was admitted.
CREATE VIEW IF NOT EXISTS {{db}}.decisions_v2
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
FROM {{db}}.events_raw_v1 FINAL
WHERE type IN ('reservation.created', 'admission.refused');

-- The state of each budget window after each event: one row per (event, window). `level` is the
-- tenant that owns the budget (the team or an org above it). Amounts are tokens, or micro-USD
-- when `budget_unit` is 'usd'.
CREATE VIEW IF NOT EXISTS {{db}}.window_states_v2
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
FROM {{db}}.events_raw_v1 FINAL
ARRAY JOIN
    w_level AS wl,
    w_budget AS wb,
    w_window AS ww,
    w_unit AS wu,
    w_limit AS wlim,
    w_used AS wused,
    w_held AS wheld,
    w_enforce AS wenf;

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
FROM {{db}}.decisions_v2
WHERE decision = 'refuse'
GROUP BY hour, tenant, org, use_case, model, reason, shadow;

-- Budget utilisation per window: the latest recorded state of every (level, budget), where
-- level is the tenant that owns the budget. `utilisation` = used / limit, `committed` =
-- (used + held) / limit. A sliding window's state is as of its last event (`as_of`): usage
-- that has since slid out of the window is still in it until the next event.
CREATE VIEW IF NOT EXISTS {{db}}.budget_utilisation_v1
AS SELECT
    level,
    budget,
    any(budget_window) AS budget_window,
    any(budget_unit) AS budget_unit,
    argMax(budget_limit, (time_ms, event_id)) AS limit_now,
    argMax(used, (time_ms, event_id)) AS used_now,
    argMax(held, (time_ms, event_id)) AS held_now,
    argMax(enforce, (time_ms, event_id)) AS enforced,
    if(limit_now = 0, 0, used_now / limit_now) AS utilisation,
    if(limit_now = 0, 0, (used_now + held_now) / limit_now) AS committed,
    toDateTime(intDiv(max(time_ms), 1000), 'UTC') AS as_of
FROM {{db}}.window_states_v2
GROUP BY level, budget;

-- Peak utilisation of every budget window per hour (from the states its events recorded).
CREATE VIEW IF NOT EXISTS {{db}}.budget_utilisation_hourly_v1
AS SELECT
    toStartOfHour(ts) AS hour,
    level,
    budget,
    any(budget_window) AS budget_window,
    any(budget_unit) AS budget_unit,
    max(budget_limit) AS limit_max,
    max(used) AS used_max,
    max(if(budget_limit = 0, 0, used / budget_limit)) AS utilisation_peak,
    max(if(budget_limit = 0, 0, (used + held) / budget_limit)) AS committed_peak,
    count() AS events
FROM {{db}}.window_states_v2
GROUP BY hour, level, budget
