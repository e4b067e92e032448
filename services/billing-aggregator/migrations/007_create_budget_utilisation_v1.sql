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
FROM {{db}}.window_states_v1 FINAL
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
FROM {{db}}.window_states_v1 FINAL
GROUP BY hour, level, budget
