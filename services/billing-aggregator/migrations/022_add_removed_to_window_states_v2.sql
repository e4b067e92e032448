-- window_states_v2 gains `removed` (w_removed, migration 021; 0 on a row written before it):
-- 1 for a window a close listed that the tenant's plan no longer has, whose budget_limit and
-- enforce are 0 (no limit any more). Its `charged` still counts (what the close billed it).
-- The utilisation views leave those rows out: they show a budget's states as a budget (a
-- removed one keeps its last, until it is added back), never a limit of 0 it does not have.
-- ARRAY JOIN of arrays of different lengths fails (an old row's w_removed is empty): read by
-- the window's index, as `charged`. A view cannot be altered in 18.16: dropped and created
-- again (readers between the statements get an error; every statement can run twice).
DROP TABLE IF EXISTS {{db}}.window_states_v2;

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
    wenf AS enforce,
    if(length(w_charged) = 0, if(wu = 'usd', charged_micro_usd, charged_tokens), w_charged[n])
        AS charged,
    if(length(w_removed) = 0, 0, w_removed[n]) AS removed
FROM {{db}}.events_raw_v1 FINAL
ARRAY JOIN
    w_level AS wl,
    w_budget AS wb,
    w_window AS ww,
    w_unit AS wu,
    w_limit AS wlim,
    w_used AS wused,
    w_held AS wheld,
    w_enforce AS wenf,
    arrayEnumerate(w_budget) AS n;

DROP TABLE IF EXISTS {{db}}.budget_utilisation_v1;

-- As migration 009's, from the windows' states as budgets (removed = 0).
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
WHERE removed = 0
GROUP BY level, budget;

DROP TABLE IF EXISTS {{db}}.budget_utilisation_hourly_v1;

-- As migration 009's, from the windows' states as budgets (removed = 0).
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
WHERE removed = 0
GROUP BY hour, level, budget;
