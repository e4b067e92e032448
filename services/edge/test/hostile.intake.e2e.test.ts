import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, tenantMetric, type Stack } from './harness.js';

/**
 * One tenant's large bodies cannot stall another tenant's calls. A body is parsed and validated
 * on the edge's event loop; a tenant sending many multi-MiB bodies (refused once counted, so
 * they cost it nothing) held every other tenant's calls for seconds (a small call's p50 went
 * from 5 ms to 760 ms beside 8 connections sending 8 MiB bodies). Large bodies now wait for
 * turns, fair between tenants and at most a share of the loop (request/intake.ts). Real NATS,
 * Redis, authority and edge; the order of the answers and the edge's metrics are asserted,
 * never a time.
 */

const A = 'batch-summariser';
const B = 'support-bot';

/** A chat body of about `bytes` bytes in many short messages (the slowest shape to parse). */
function manyMessages(bytes: number, seed: number): string {
  const messages: Array<{ role: string; content: string }> = [];
  for (let n = 0; n < bytes; n += 200) {
    messages.push({ role: 'user', content: `${'x'.repeat(170)} ${seed} ${n}` });
  }
  return JSON.stringify({ model: 'gpt-4o-mini', messages, max_tokens: 5 });
}

/** Posts a body; its name goes into `done` when it is answered. */
function post(s: Stack, key: string, name: string, body: string, done: string[]) {
  return fetch(`${s.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body,
  })
    .then(async (r) => {
      await r.arrayBuffer();
      return { status: r.status, code: r.headers.get('x-holdfast-error-code') };
    })
    .finally(() => done.push(name));
}

test("a tenant flooding multi-MiB bodies does not hold up another tenant's calls, small or large", async ({
  stack,
}) => {
  const FLOOD = 12;
  const s = await stack({
    patch: (c) => {
      entry(c.tenants, A).maxInFlight = 64;
    },
  });
  const done: string[] = [];
  const flood = Array.from({ length: FLOOD }, (_, i) =>
    post(s, KEYS.batch, `a${i}`, manyMessages(6 * 1024 * 1024, i), done),
  );
  await waitFor(
    async () => (await tenantMetric(s, 'edge_intake_queue_depth', A)) >= 4 || undefined,
    {
      what: "A's bodies waiting for their turns",
      timeoutMs: 60_000,
    },
  );
  // B's small calls go on between A's turns: each is answered while A still has bodies waiting.
  const small = JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 5,
  });
  for (const i of [0, 1, 2]) {
    expect(await post(s, KEYS.support, `b${i}`, small, done)).toEqual({ status: 200, code: null });
  }
  expect(await tenantMetric(s, 'edge_intake_queue_depth', A)).toBeGreaterThanOrEqual(1);
  // B's own large body (refused by its budget once counted) gets the next turn, not the last.
  const large = await post(s, KEYS.support, 'b-large', manyMessages(1024 * 1024, 99), done);
  expect(large.status).toBe(429);
  expect(await tenantMetric(s, 'edge_intake_queue_depth', A)).toBeGreaterThanOrEqual(1);

  const a = await Promise.all(flood);
  expect(a.every((r) => r.status === 429)).toBe(true);
  expect(done.indexOf('b-large')).toBeLessThan(done.length - 1);
  // Every large body had its turn once; none is left waiting.
  expect(await tenantMetric(s, 'edge_intake_wait_seconds_count', A)).toBe(FLOOD);
  expect(await tenantMetric(s, 'edge_intake_wait_seconds_count', B)).toBe(1);
  expect(await tenantMetric(s, 'edge_intake_queue_depth', A)).toBe(0);
  expect(s.upstream.stats().recent).toHaveLength(3);
});

test('a large body takes its turn whatever carries it (fastify inject has no real socket), and is served', async ({
  stack,
}) => {
  const s = await stack({});
  const res = await s.edge.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${KEYS.support}`, 'content-type': 'application/json' },
    payload: manyMessages(100 * 1024, 1),
  });
  // Parsed in its turn and served, not dropped as a client that left.
  expect(res.statusCode, res.body.slice(0, 200)).toBe(200);
  expect(await tenantMetric(s, 'edge_intake_wait_seconds_count', B)).toBe(1);
});
