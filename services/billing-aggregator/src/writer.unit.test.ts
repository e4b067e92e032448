import { describe, expect, it } from 'vitest';
import { settledCall } from '../test/events.js';
import type { SqlExecutor } from './clickhouse.js';
import { RowBinaryEncoder } from './rowbinary.js';
import { EVENTS_RAW_COLUMNS, toEventRow, writeEventRow } from './rows.js';
import { createEventsWriter, isDataError } from './writer.js';

class FakeChError extends Error {
  constructor(readonly code: string) {
    super(`Code: ${code}`);
  }
}

/** Event ids of the rows made by `rows()`, found in a RowBinary body by their bytes. */
const ids: string[] = [];
const idsIn = (body: Uint8Array) => ids.filter((id) => Buffer.from(body).includes(id));

function fakeClickHouse(fail: (ids: string[]) => Error | undefined) {
  const stored: string[] = [];
  let inserts = 0;
  const ch: SqlExecutor = {
    command: () => Promise.resolve(),
    query: () => Promise.resolve([]),
    insert: () => Promise.reject(new Error('the writer sends RowBinary')),
    insertRowBinary: (_table, columns, body) => {
      inserts++;
      expect(columns).toEqual(EVENTS_RAW_COLUMNS.map(([c]) => c));
      const err = fail(idsIn(body));
      if (err) return Promise.reject(err);
      stored.push(...idsIn(body));
      return Promise.resolve();
    },
    ping: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  };
  return { ch, stored, inserts: () => inserts };
}

const encoder = new RowBinaryEncoder();
const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => {
    const row = toEventRow(settledCall()[1], i + 1);
    ids.push(row.id);
    return { id: row.id, bytes: writeEventRow(encoder, row) };
  });
const bytes = (rs: ReturnType<typeof rows>) => rs.map((r) => r.bytes);

describe('events writer', () => {
  it('inserts a batch in one insert', async () => {
    const f = fakeClickHouse(() => undefined);
    const w = createEventsWriter({ ch: f.ch, database: 'holdfast' });
    expect(await w.write(bytes(rows(10)))).toEqual({ ok: true, value: [] });
    expect(f.inserts()).toBe(1);
    expect(f.stored).toHaveLength(10);
  });

  it('isolates rows ClickHouse rejects by splitting the batch, and stores the rest', async () => {
    const batch = rows(16);
    const poison = new Set([batch[3]!.id, batch[12]!.id]);
    const f = fakeClickHouse((rs) =>
      rs.some((id) => poison.has(id)) ? new FakeChError('27') : undefined,
    );
    const w = createEventsWriter({ ch: f.ch, database: 'holdfast' });
    const out = await w.write(bytes(batch));
    expect(out.ok && out.value.map((r) => r.index)).toEqual([3, 12]);
    expect(f.stored).toHaveLength(14);
    expect(f.inserts()).toBeLessThan(16);
  });

  it('reports an unavailable ClickHouse as transient, without splitting', async () => {
    const f = fakeClickHouse(() =>
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    );
    const w = createEventsWriter({ ch: f.ch, database: 'holdfast' });
    const out = await w.write(bytes(rows(8)));
    expect(out).toMatchObject({
      ok: false,
      error: { code: 'clickhouse_unavailable', retry: true },
    });
    expect(f.inserts()).toBe(1);
  });

  it('classifies ClickHouse data errors only', () => {
    expect(isDataError(new FakeChError('27'))).toBe(true);
    expect(isDataError(new FakeChError('60'))).toBe(false);
    expect(isDataError(new Error('socket hang up'))).toBe(false);
    expect(isDataError(null)).toBe(false);
  });
});
