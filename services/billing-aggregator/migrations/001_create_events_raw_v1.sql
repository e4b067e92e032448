-- Every event, once per id. The source of truth for every view and for the drift audit.
--
-- Exactly-once: JetStream redelivers (ack lost, nak, crash after insert) and a relay may
-- republish an event after the stream's duplicate window, so the same `id` can be inserted
-- twice. ReplacingMergeTree keeps one row per sorting key, and the key (tenant, ts, id) is a
-- function of the event alone, so duplicates collapse; every reader uses FINAL. No aggregating
-- materialized view reads this table: those count every inserted block (measured on ClickHouse 18.16: the same event
-- inserted twice is counted twice), so aggregates are plain views over `FINAL`.
--
-- Columns: amounts are integers (tokens; money in micro-USD). `time_ms` keeps the event's
-- millisecond time (DateTime64 is not on 18.16); `ts` is the same instant to the second.
-- Fields a type does not have are 0 or ''. `extra` holds, as JSON, the event's fields that
-- have no column (alert figures, a refusal's message, expiresAt, ...); '' when there are none.
-- The whole event is not stored again: it would halve the insert rate (measured).
CREATE TABLE IF NOT EXISTS {{db}}.events_raw_v1
(
    id String,
    type String,
    schema_version UInt8,
    ts DateTime('UTC'),
    time_ms UInt64,
    tenant String,
    org String,
    reservation_id String,
    key_id String,
    use_case String,
    model String,
    mode String,
    prompt_tokens UInt32,
    completion_tokens UInt32,
    cached_prompt_tokens UInt32,
    max_tokens UInt32,
    requested_max_tokens UInt32,
    held_tokens UInt64,
    held_micro_usd UInt64,
    billed_tokens UInt64,
    cost_micro_usd UInt64,
    charged_tokens Int64,
    charged_micro_usd Int64,
    needed_tokens UInt64,
    needed_micro_usd UInt64,
    outcome String,
    reason String,
    code String,
    shadow UInt8,
    budget String,
    level String,
    duration_ms UInt32,
    w_level Array(String),
    w_budget Array(String),
    w_window Array(String),
    w_unit Array(String),
    w_limit Array(Int64),
    w_used Array(Int64),
    w_held Array(Int64),
    w_enforce Array(UInt8),
    extra String,
    stream_seq UInt64,
    ingested_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, ts, id)
SETTINGS index_granularity = 8192
