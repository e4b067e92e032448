import { readFile } from 'node:fs/promises';
import { parseConfig } from '@holdfast/config';
import { EXAMPLE_CONFIG } from '@holdfast/stack';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { newRunIdentity, runDocument } from './run-config.js';

describe('runDocument', () => {
  it('adds a run of three teams to the stack config, which stays valid and keeps its own tenants', async () => {
    const base = parse(await readFile(EXAMPLE_CONFIG, 'utf8')) as Record<string, unknown>;
    const run = newRunIdentity();
    const doc = runDocument(base, run, {
      mode: 'post',
      batchBudget: 26_000,
      upstreamUrl: 'http://127.0.0.1:8089/v1',
    });
    const parsed = parseConfig(doc);
    if (!parsed.ok) throw new Error(parsed.error.errors.join('\n'));
    const { tenants } = parsed.value;
    expect([...tenants.keys()]).toEqual([
      'acme',
      'batch-summariser',
      'support-bot',
      'finance-ops',
      run.tenant.batch,
      run.tenant.support,
      run.tenant.finance,
    ]);
    const batch = tenants.get(run.tenant.batch)!;
    expect(batch.mode).toBe('post');
    expect(batch.budgets.map((b) => [b.window, b.limit])).toEqual([['month', 26_000]]);
    expect(parsed.value.raw.alerts.suspendAtHardLimit).toBe(false);

    // The next run replaces this run's teams instead of piling up.
    const next = newRunIdentity();
    const again = parseConfig(
      runDocument(doc, next, {
        mode: 'reserve',
        batchBudget: 40_000,
        upstreamUrl: 'http://x:1/v1',
      }),
    );
    if (!again.ok) throw new Error(again.error.errors.join('\n'));
    expect([...again.value.tenants.keys()].filter((t) => t.startsWith('exp-'))).toEqual([
      next.tenant.batch,
      next.tenant.support,
      next.tenant.finance,
    ]);
  });
});
