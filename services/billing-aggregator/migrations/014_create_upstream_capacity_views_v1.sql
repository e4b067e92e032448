-- Declared upstream capacity, per hour: what each tenant reserved on each upstream (the worst
-- case admission took from the upstream's minute window, `reservation.created` with an
-- `upstream`), and who was shed (refused `upstream_capacity`: the upstream was full for the
-- tenant's priority). Refusals are summed by their `count`, as in refusals_by_reason_v1.
-- Rows written before migration 013 have no upstream and are not in either view.
CREATE VIEW IF NOT EXISTS {{db}}.upstream_capacity_hourly_v1
AS SELECT
    toStartOfHour(ts) AS hour,
    upstream,
    tenant,
    org,
    countIf(type = 'reservation.created') AS admitted,
    sumIf(held_tokens, type = 'reservation.created') AS reserved_tokens,
    sumIf(
        if(visitParamExtractUInt(extra, 'count') = 0, 1, visitParamExtractUInt(extra, 'count')),
        type = 'admission.refused'
    ) AS shed
FROM {{db}}.events_raw_v1 FINAL
WHERE upstream != ''
    AND (type = 'reservation.created' OR (type = 'admission.refused' AND code = 'upstream_capacity'))
GROUP BY hour, upstream, tenant, org;
