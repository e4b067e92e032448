import { describe, expect, it } from 'vitest';
import { loadConfig } from './env.js';
import { backoffDelay } from '@holdfast/retry';
import { REDELIVER } from './consumer.js';

describe('config', () => {
  it('has defaults for every variable (docs/clickhouse.md: database holdfast, 5 s batches, port 9102)', () => {
    const c = loadConfig({});
    expect(c.clickhouse.database).toBe('holdfast');
    expect(c.batch).toEqual({ maxRows: 25_000, maxWaitMs: 5_000 });
    expect(c.opsPort).toBe(9102);
    expect(c.nats.names.eventsStream).toBe('HOLDFAST_EVENTS');
    expect(c.consumer.durable).toBe('billing-aggregator');
    // In bursts by default, far inside the 5 s flush; 0 is consume().
    expect(c.consumer.pullEveryMs).toBe(250);
    expect(loadConfig({ BILLING_AGGREGATOR_PULL_EVERY_MS: '0' }).consumer.pullEveryMs).toBe(0);
  });

  it('names the variable that is wrong', () => {
    expect(() => loadConfig({ CLICKHOUSE_DATABASE: 'a-b; DROP' })).toThrow(/CLICKHOUSE_DATABASE/);
    expect(() =>
      loadConfig({ BILLING_AGGREGATOR_BATCH_SIZE: '100', BILLING_AGGREGATOR_FETCH_SIZE: '500' }),
    ).toThrow(/BILLING_AGGREGATOR_FETCH_SIZE/);
    expect(() => loadConfig({ BILLING_AGGREGATOR_MAX_ACK_PENDING: '10' })).toThrow(
      /BILLING_AGGREGATOR_MAX_ACK_PENDING/,
    );
  });
});

describe('nak delay', () => {
  it('doubles from 500 ms and stops at 10 s', () => {
    expect([1, 2, 3, 4, 5, 6, 50].map((n) => backoffDelay(REDELIVER, n))).toEqual([
      500, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000,
    ]);
  });
});
