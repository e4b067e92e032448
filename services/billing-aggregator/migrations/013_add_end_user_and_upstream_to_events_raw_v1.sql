-- The call's end user and the upstream whose capacity it took:
-- - end_user: the end user as Holdfast keys its budgets (the OpenAI `user` field, Anthropic
--   `metadata.user_id` or `x-holdfast-user`; `sha256:<32 hex>` for one that is not short
--   printable ASCII), on every event of the call; '' when the client named none;
-- - upstream: on reservation.created, the upstream whose declared capacity the call took
--   ('' when none declares one).
-- A key's or an end user's own budget window goes in the w_* arrays like a team's, its w_level
-- naming whose it is: `<team>/key:<key id>` or `<team>/user:<end user>` (a tenant id has no
-- '/'), so budget_utilisation_v1 shows one row per key and end user budget.
-- 18.16 has no ADD COLUMN IF NOT EXISTS: the runner skips a column that already exists.
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN end_user String;
ALTER TABLE {{db}}.events_raw_v1 ADD COLUMN upstream String;
