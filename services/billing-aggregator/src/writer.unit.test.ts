import { describe, expect, it } from 'vitest';
import { settledCall } from '../test/events.js';
import type { SqlExecutor } from './clickhouse.js';
import { toEventRow, type EventRow } from './rows.js';
import { createEventsWriter, isDataError } from './writer.js';

class FakeChError extends Error {
  constructor(readonly code: string) {
    super(`Code: ${code}`);
  }
}

function fakeClickHouse(fail: (rows: readonly EventRow[]) => Error | undefined) {
  const stored: EventRow[] = [];
  let inserts = 0;
  const ch: SqlExecutor = {
    command: () => Promise.resolve(),
    query: () => Promise.resolve([]),
    insert: (_table, rows) => {
      inserts++;
      const err = fail(rows as EventRow[]);
      if (err) return Promise.reject(err);
      stored.push(...(rows as EventRow[]));
      return Promise.resolve();
    },
    ping: () => Promise.resolve(true),
    close: () => Promise.resolve(),
  };
  return { ch, stored, inserts: () => inserts };
}

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => toEventRow(settledCall()[1], i + 1));

describe('events writer', () => {
  it('inserts a batch in one insert', async () => {
    const f = fakeClickHouse(() => undefined);
    const w = createEventsWriter({ ch: f.ch, database: 'holdfast' });
    expect(await w.write(rows(10))).toEqual({ ok: true, rejected: [] });
    expect(f.inserts()).toBe(1);
    expect(f.stored).toHaveLength(10);
  });

  it('isolates rows ClickHouse rejects by splitting the batch, and stores the rest', async () => {
    const batch = rows(16);
    const poison = new Set([batch[3]!.id, batch[12]!.id]);
    const f = fakeClickHouse((rs) =>
      rs.some((r) => poison.has(r.id)) ? new FakeChError('27') : undefined,
    );
    const w = createEventsWriter({ ch: f.ch, database: 'holdfast' });
    const out = await w.write(batch);
    expect(out.ok && out.rejected.map((r) => r.index)).toEqual([3, 12]);
    expect(f.stored).toHaveLength(14);
    expect(f.inserts()).toBeLessThan(16);
  });

  it('reports an unavailable ClickHouse as transient, without splitting', async () => {
    const f = fakeClickHouse(() =>
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    );
    const w = createEventsWriter({ ch: f.ch, database: 'holdfast' });
    const out = await w.write(rows(8));
    expect(out.ok).toBe(false);
    expect(f.inserts()).toBe(1);
  });

  it('classifies ClickHouse data errors only', () => {
    expect(isDataError(new FakeChError('27'))).toBe(true);
    expect(isDataError(new FakeChError('60'))).toBe(false);
    expect(isDataError(new Error('socket hang up'))).toBe(false);
    expect(isDataError(null)).toBe(false);
  });
});
