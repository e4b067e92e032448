import { BaseError, Err, Ok, errorMessage, type Result } from '@holdfast/runtime';
import type { SqlExecutor } from './clickhouse.js';
import { EVENTS_RAW_COLUMNS } from './rows.js';
import { qualified } from './sql.js';

/**
 * ClickHouse error codes that mean "this data cannot be inserted", as opposed to "ClickHouse
 * is unavailable": parse failures, type mismatches, bad sizes. Retrying such a row forever
 * would block the pipeline, so the writer isolates it and the caller dead-letters it.
 */
const DATA_ERROR_CODES = new Set([
  '6', // CANNOT_PARSE_TEXT
  '26', // CANNOT_PARSE_QUOTED_STRING
  '27', // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  '32', // ATTEMPT_TO_READ_AFTER_EOF
  '33', // CANNOT_READ_ALL_DATA
  '38', // CANNOT_PARSE_DATE
  '41', // CANNOT_PARSE_DATETIME
  '53', // TYPE_MISMATCH
  '69', // ARGUMENT_OUT_OF_BOUND
  '70', // CANNOT_CONVERT_TYPE
  '72', // CANNOT_PARSE_NUMBER
  '117', // INCORRECT_DATA
  '131', // TOO_LARGE_STRING_SIZE
  '190', // SIZES_OF_ARRAYS_DOESNT_MATCH
]);

export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && DATA_ERROR_CODES.has(code);
}

/** A row ClickHouse refused, by its index in the batch, and why. */
interface RejectedRow {
  index: number;
  error: string;
}

/** ClickHouse is unavailable (or failed in a way a retry may fix); nothing is known persisted. */
class WriteError extends BaseError<'clickhouse_unavailable'> {
  constructor(cause: unknown) {
    super({ code: 'clickhouse_unavailable', message: errorMessage(cause), retry: true, cause });
  }
}

/** Ok: every row not listed as rejected is persisted. */
type WriteOutcome = Result<RejectedRow[], WriteError>;

export interface EventsWriter {
  /** `rows`: each one row of events_raw_v1 encoded as RowBinary (`RowBinaryEncoder`). */
  write(rows: readonly Uint8Array[]): Promise<WriteOutcome>;
}

const COLUMN_NAMES = EVENTS_RAW_COLUMNS.map(([name]) => name);

/**
 * The writer of `events_raw_v1`, the only table the aggregator fills (every other relation is
 * a view over it). A batch is one INSERT, its rows' bytes in one body. When ClickHouse rejects
 * the data, the batch is split in halves until the offending rows are found: those come back as
 * the rejected rows, every other row is persisted. Inserting a row twice is harmless (the table
 * collapses equal ids), so a half that went in before a later failure may be sent again.
 */
export function createEventsWriter(opts: { ch: SqlExecutor; database: string }): EventsWriter {
  const table = qualified(opts.database, 'events_raw_v1');

  async function write(rows: readonly Uint8Array[], offset: number): Promise<WriteOutcome> {
    if (rows.length === 0) return Ok([]);
    try {
      await opts.ch.insertRowBinary(table, COLUMN_NAMES, Buffer.concat(rows));
      return Ok([]);
    } catch (err) {
      if (!isDataError(err)) return Err(new WriteError(err));
      if (rows.length === 1) {
        return Ok([{ index: offset, error: errorMessage(err) }]);
      }
      const mid = Math.ceil(rows.length / 2);
      const left = await write(rows.slice(0, mid), offset);
      if (!left.ok) return left;
      const right = await write(rows.slice(mid), offset + mid);
      if (!right.ok) return right;
      return Ok([...left.value, ...right.value]);
    }
  }

  return { write: (rows) => write(rows, 0) };
}
