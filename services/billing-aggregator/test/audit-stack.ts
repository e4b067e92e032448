import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import type { AuthorityClient } from '@holdfast/runtime';
import { startAggregator } from '../src/index.js';
import { aggregatorTest } from './fixture.js';
import { aggregatorConfig, silent } from './harness.js';

const AUDIT_CLI = fileURLToPath(new URL('../dist/cli/audit.js', import.meta.url));

const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini', 'gpt-4o'] }];
export const CONFIG = {
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    {
      id: 'gpt-4o-mini',
      upstream: 'default',
      price: { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
    },
    { id: 'gpt-4o', upstream: 'default', price: { inputPerMTok: 2.5, outputPerMTok: 10 } },
  ],
  tenants: [
    { id: 'acme', budgets: [{ window: 'month', limit: 10_000_000 }], useCases },
    {
      id: 'team-a',
      parent: 'acme',
      budgets: [
        { window: 'minute', limit: 500_000 },
        { window: 'day', limit: 5, unit: 'usd' },
      ],
      useCases,
    },
    {
      id: 'team-b',
      parent: 'acme',
      mode: 'estimate',
      budgets: [{ window: 'month', limit: 500_000, calendar: true }],
      useCases,
    },
    { id: 'solo', budgets: [{ window: 'day', limit: 4_000 }], useCases },
  ],
};

export function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [AUDIT_CLI, ...args],
      { env: { ...process.env, ...env } },
      (err, stdout) => {
        const code = err ? Number((err as { code?: number }).code ?? 1) : 0;
        resolve({ code, stdout });
      },
    );
  });
}

/** Calls through the real authority: settled, released, left open, refused. */
export async function workload(
  client: AuthorityClient,
): Promise<{ admitted: number; refused: number }> {
  const tenants = ['team-a', 'team-b', 'solo'];
  let admitted = 0;
  let refused = 0;
  for (let i = 0; i < 60; i++) {
    const tenant = tenants[i % 3]!;
    const reservationId = randomUUID();
    const r = await client.admit({
      reservationId,
      tenant,
      keyId: null,
      useCase: 'uc',
      model: i % 4 === 0 ? 'gpt-4o' : 'gpt-4o-mini',
      promptTokens: 100 + i,
      maxTokens: 200,
    });
    if (!r.ok) throw new Error(r.error.message);
    if (!r.value.admitted) {
      refused++;
      continue;
    }
    admitted++;
    if (i % 10 === 7) {
      await client.release({ reservationId, tenant, reason: 'upstream_error' });
    } else if (i % 10 !== 9) {
      const s = await client.settle({
        reservationId,
        tenant,
        usage: { promptTokens: 100 + i, completionTokens: (i * 37) % 200 },
      });
      if (!s.ok) throw new Error(s.error.message);
    }
  }
  return { admitted, refused };
}

/**
 * aggregatorTest plus `audited`: the real authority in this process (CONFIG applied, real
 * clock, the service's default sweep and relay lease), an aggregator whose audit
 * job runs every 300 ms, and a client of the authority; stopped after the test.
 */
export const auditTest = aggregatorTest.extend<{
  audited: { client: AuthorityClient; agg: Awaited<ReturnType<typeof startAggregator>> };
}>({
  audited: async ({ nc, infra, redisUrl, redis, iso }, use) => {
    void redis; // its fixture removes the test's keys afterwards
    const authority = await startTestAuthority({
      natsUrl: infra.natsUrl,
      redisUrl,
      nc,
      names: iso.names,
      keyPrefix: iso.keyPrefix,
      config: CONFIG,
      clock: false,
      sweepIntervalMs: 1_000,
      relayLeaseMs: 5_000,
    });
    const agg = await startAggregator({
      config: aggregatorConfig(infra, { BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '300' }),
      logger: silent,
    });
    await use({ client: authority.client, agg });
    await agg.stop();
    await authority.stop();
  },
});
