import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { natsNamesToEnv } from '@holdfast/config';
import { AuthorityClient } from '@holdfast/runtime';
import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import type { ExperimentResult } from '../experiment/experiment.js';
import { startStackProcess } from './stack-process.js';
import { node } from './tools.js';

test('pnpm experiment, fast mode, against a running stack: reserve never bills above the budget, post overshoots, the stack gets its config back', async ({
  natsUrl,
  redisUrl,
  clickhouseUrl,
  iso,
  nc,
  redis: _cleansRedis,
  clickhouse: _cleansClickHouse,
}) => {
  // `pnpm stack` on the test's servers, under names of its own.
  const stack = await startStackProcess({
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    CLICKHOUSE_URL: clickhouseUrl,
    HOLDFAST_KEY_PREFIX: iso.keyPrefix,
    CLICKHOUSE_DATABASE: iso.database,
    ...natsNamesToEnv(iso.names),
    // The stack waits on each service's /readyz, not a log line: quiet logs start too.
    LOG_LEVEL: 'warn',
  });
  try {
    const authority = new AuthorityClient({ nc, names: iso.names });
    const configHash = async () => {
      const r = await authority.configGet();
      if (!r.ok) throw new Error(r.error.message);
      return r.value.hash;
    };
    const mockConfig = async (): Promise<unknown> =>
      (await fetch(`${stack.state.urls.mock}/_mock/config`)).json();
    const [hashBefore, mockBefore] = [await configHash(), await mockConfig()];

    const json = join(stack.dir, 'experiment.json');
    const fast = ['--reps', '1', '--modes', 'post,reserve', '--workers', '16'];
    const { code, out } = await node(
      'test/dist/experiment/main.js',
      [...fast, '--sweep', '26000', '--retry-after', '--json', json],
      stack.dir,
    );
    expect(code, out).toBe(0);
    expect(out).toContain(
      '| Mode | Workers | Billed (median) | vs budget | Calls served | Calls refused (429) |',
    );

    const result = JSON.parse(await readFile(json, 'utf8')) as ExperimentResult;
    const all = [...result.runs, ...result.sweep, ...result.retryAfter];
    expect(all.map((r) => `${r.spec.mode}/${r.spec.batchBudget}`)).toEqual([
      'post/40000',
      'reserve/40000',
      'post/26000',
      'reserve/26000',
      'post/40000',
      'reserve/40000',
    ]);
    for (const r of all) {
      const { mode, batchBudget } = r.spec;
      // What the authority settled is what the provider billed.
      expect(r.billed, r.runId).toBe(r.providerBilled);
      if (mode === 'reserve') expect(r.billed, r.runId).toBeLessThanOrEqual(batchBudget);
      else expect(r.billed, r.runId).toBeGreaterThan(batchBudget);
      expect(r.digests.served + Object.values(r.digests.refused).reduce((a, b) => a + b, 0)).toBe(
        60,
      );
    }
    for (const r of result.runs) {
      expect(r.triage?.served).toBe(24);
      expect(new Set(r.triage?.upstreamMaxTokens)).toEqual(new Set([512]));
      expect(r.unregistered).toEqual({
        served: 0,
        refused: { use_case_not_registered: 6 },
        reachedModel: 0,
      });
      expect(r.unknownTeam).toEqual({
        served: 0,
        refused: { invalid_api_key: 6 },
        reachedModel: 0,
      });
    }

    // The experiment put the stack's config and the mock's behaviour back.
    expect(await configHash()).toBe(hashBefore);
    expect(await mockConfig()).toEqual(mockBefore);
  } finally {
    await stack.cleanup();
  }
});
