import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HoldfastConfig } from '@holdfast/config';
import { AuthorityClient } from '@holdfast/runtime';
import { infraTest as test, startService, waitFor, type ServiceProcess } from '@holdfast/testkit';
import { expect, onTestFinished } from 'vitest';
import { BASE_CONFIG, processEnv } from './harness.js';
import { startTestAuthority } from '../src/testing.js';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

type Doc = typeof BASE_CONFIG;
const key = (id: string) => ({ id, sha256: createHash('sha256').update(id).digest('hex') });

/** A copy of the document with one tenant changed. */
function withTenant(doc: Doc, id: string, change: (t: Record<string, unknown>) => void): Doc {
  const copy = structuredClone(doc);
  const t = copy.tenants.find((x) => x.id === id) as Record<string, unknown>;
  change(t);
  return copy;
}

/** The process's log line with this message; lines are written in blocks, so wait for it. */
function logged(proc: ServiceProcess, msg: string): Promise<Record<string, unknown>> {
  return waitFor(
    () => {
      const line = proc.lines.find((l) => l.includes(`"msg":"${msg}"`));
      return line ? (JSON.parse(line) as Record<string, unknown>) : undefined;
    },
    { timeoutMs: 5_000, what: `the log line "${msg}"` },
  );
}

test('changes made through the admin API last across restarts; the file applies only when it changed, merged, and says what it overrode', async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-config-source-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'holdfast.yaml');
  await writeFile(file, JSON.stringify(BASE_CONFIG));
  const start = () => startService(MAIN, processEnv({ natsUrl, redisUrl, iso, configFile: file }));
  const client = new AuthorityClient({ nc, names: iso.names, timeoutMs: 5_000 });
  const stored = async () => {
    const r = await client.configGet();
    if (!r.ok) throw new Error(r.error.message);
    return { ...r.value, config: r.value.config as HoldfastConfig };
  };
  const tenant = (c: HoldfastConfig, id: string) => c.tenants.find((t) => t.id === id)!;

  let proc = await start();
  onTestFinished(() => proc.stop());
  expect(await stored()).toMatchObject({ version: 1, declared: { version: 1 }, divergence: [] });

  // The admin API's edit: a key for support-bot (read-modify-write of the stored document).
  const first = await stored();
  const withKey = withTenant(first.config as Doc, 'support-bot', (t) => {
    t.keys = [key('ops-1')];
  });
  const edited = await client.configApply({ document: withKey, expectedVersion: 1 });
  expect(edited.ok && edited.value.version).toBe(2);

  // A restart with the same file: nothing applied, the key is still there, and reported.
  await proc.stop();
  proc = await start();
  expect(
    await logged(proc, 'config file unchanged since it was applied; serving the stored config'),
  ).toMatchObject({
    appliedAt: 1,
    version: 2,
    adminChanges: [{ path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' }],
  });
  const afterRestart = await stored();
  expect(afterRestart.version).toBe(2);
  expect(tenant(afterRestart.config, 'support-bot').keys.map((k) => k.id)).toEqual(['ops-1']);
  expect(afterRestart.divergence).toEqual([
    { path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' },
  ]);

  // The admin API raises support-bot's budget; then the file changes that budget and batch's cap.
  const raised = withTenant(afterRestart.config as Doc, 'support-bot', (t) => {
    t.budgets = [{ window: 'month', limit: 90_000, unit: 'tokens' }];
  });
  expect((await client.configApply({ document: raised, expectedVersion: 2 })).ok).toBe(true);
  const nextFile = withTenant(
    withTenant(BASE_CONFIG, 'support-bot', (t) => {
      t.budgets = [{ window: 'month', limit: 70_000, unit: 'tokens' }];
    }),
    'batch-summariser',
    (t) => {
      t.maxInFlight = 8;
    },
  );
  await writeFile(file, JSON.stringify(nextFile));
  // The running authority sees the file change: the file's changes apply, the key stays, and
  // the budget the admin API had raised is the file's again, with a warning that says so.
  const merged = await waitFor(
    async () => ((await stored()).version === 4 ? stored() : undefined),
    {
      timeoutMs: 10_000,
      what: 'the changed file to be applied',
    },
  );
  expect(tenant(merged.config, 'batch-summariser').maxInFlight).toBe(8);
  expect(tenant(merged.config, 'support-bot').keys.map((k) => k.id)).toEqual(['ops-1']);
  expect(tenant(merged.config, 'support-bot').budgets[0]?.limit).toBe(70_000);
  expect(await logged(proc, 'kept changes made through the admin API')).toMatchObject({
    kept: [{ path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' }],
  });
  expect(
    await logged(proc, 'the document overrides changes made through the admin API'),
  ).toMatchObject({
    overridden: [
      { path: 'tenants[id=support-bot].budgets[month-tokens].limit', change: 'changed' },
    ],
  });
  expect(merged.declared).toMatchObject({ version: 4, source: `file:${file}` });

  // And once more across a restart: the changed file is not applied again.
  await proc.stop();
  proc = await start();
  expect((await stored()).version).toBe(4);
  expect(
    await logged(proc, 'config file unchanged since it was applied; serving the stored config'),
  ).toMatchObject({
    appliedAt: 4,
  });
});

test('holdfast apply (merge) keeps keys made through the admin API; replace drops them and says so', async ({
  nc,
  redisUrl,
  natsUrl,
  iso,
}) => {
  const h = await startTestAuthority({
    natsUrl,
    redisUrl,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: {},
  });
  onTestFinished(() => h.stop());
  const declare = await h.client.configApply({ document: BASE_CONFIG, mode: 'merge' });
  expect(declare.ok && declare.value).toMatchObject({
    version: 2,
    changed: true,
    kept: [],
    overridden: [],
  });
  const withKey = withTenant(BASE_CONFIG, 'support-bot', (t) => {
    t.keys = [key('ops-1')];
  });
  expect((await h.client.configApply({ document: withKey })).ok).toBe(true);

  const again = await h.client.configApply({ document: BASE_CONFIG, mode: 'merge' });
  expect(again.ok && again.value).toEqual({
    version: 3,
    hash: expect.any(String),
    changed: false,
    kept: [{ path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' }],
    overridden: [],
    keptCount: 1,
    overriddenCount: 0,
  });
  const replaced = await h.client.configApply({ document: BASE_CONFIG, mode: 'replace' });
  expect(replaced.ok && replaced.value).toMatchObject({
    version: 4,
    changed: true,
    kept: [],
    overridden: [{ path: 'tenants[id=support-bot].keys[id=ops-1]', change: 'added' }],
  });
  const after = await h.client.configGet();
  expect(after.ok && after.value.divergence).toEqual([]);
});
