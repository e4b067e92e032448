-- window_states_v2 gains `charged`: what the event added to the window's `used` (w_charged,
-- migration 019: the window's own charge, so a budget added while a call was held shows what
-- its close billed it), or on a row written before 019 (an empty w_charged) the event's
-- charged_tokens, charged_micro_usd for a usd window. So `sum(charged)` of a (level, budget)
-- over the events that move windows is what that window was charged, per event, hour or day.
-- Every other column is as before; the views built on it (budget_utilisation_v1,
-- budget_utilisation_hourly_v1) read it by name and are unchanged.
-- ARRAY JOIN of arrays of different lengths fails (an old row's w_charged is empty), so the
-- window's index is joined with the other arrays and w_charged read by it (18.16 has no lambda
-- over a row's columns to build an array of the same length).
-- A view cannot be altered in 18.16: dropped and created again (readers between the two
-- statements get an error; both statements can run twice).
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
        AS charged
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
