import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { authorityStartedSubject } from '@holdfast/events';
import { AuthorityClient } from '@holdfast/runtime';
import { infraTest as test, startService, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { BASE_CONFIG, newId, processEnv } from './harness.js';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
/** How long the settle sent on the started notice waits for its answer (not for responders). */
const SETTLE_TIMEOUT_MS = 30_000;

/** The authority as a process on a config file of its own (BASE_CONFIG), which a test may edit. */
async function startProcess(fx: Omit<Parameters<typeof processEnv>[0], 'configFile'>) {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-authority-'));
  const file = join(dir, 'holdfast.yaml');
  await writeFile(file, JSON.stringify(BASE_CONFIG));
  return { file, proc: await startService(MAIN, processEnv({ ...fx, configFile: file })) };
}

test('the process serves health, readiness and metrics, and re-applies its config file without restart', async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const { file, proc } = await startProcess({ natsUrl, redisUrl, iso });
  try {
    const ready = JSON.parse(proc.lines.find((l) => l.includes('"msg":"ready"'))!) as {
      opsPort: number;
      configVersion: number;
    };
    expect(ready.configVersion).toBe(1);
    const ops = `http://127.0.0.1:${ready.opsPort}`;
    expect(await (await fetch(`${ops}/healthz`)).json()).toEqual({ ok: true });
    expect(await (await fetch(`${ops}/readyz`)).json()).toEqual({
      ok: true,
      checks: { redis: true, nats: true },
    });

    const client = new AuthorityClient({ nc, names: iso.names });
    await client.admit({
      reservationId: newId(),
      tenant: 'support-bot',
      keyId: null,
      useCase: 'UC-101',
      model: 'gpt-4o-mini',
      promptTokens: 1,
      maxTokens: 1,
    });
    const metrics = await (await fetch(`${ops}/metrics`)).text();
    expect(metrics).toContain(
      'holdfast_authority_admissions_total{outcome="admitted",code="",service="budget-authority"} 1',
    );
    expect(metrics).toContain('holdfast_authority_holds_outstanding{service="budget-authority"} 1');
    expect(metrics).toContain('holdfast_authority_request_duration_seconds_bucket');

    // Edit the file: a new team appears without a restart.
    const next = {
      ...BASE_CONFIG,
      tenants: [
        ...BASE_CONFIG.tenants,
        { id: 'new-team', useCases: [{ id: 'uc', maxTokens: 10, models: ['gpt-4o-mini'] }] },
      ],
    };
    await writeFile(file, JSON.stringify(next));
    await waitFor(
      async () => {
        const r = await client.configGet();
        return r.ok && r.value.version === 2;
      },
      { timeoutMs: 10_000, what: 'config version 2' },
    );
    const admitted = await client.admit({
      reservationId: newId(),
      tenant: 'new-team',
      keyId: null,
      useCase: 'uc',
      model: 'gpt-4o-mini',
      promptTokens: 1,
      maxTokens: 1,
    });
    expect(admitted).toMatchObject({ ok: true, value: { admitted: true } });

    // A broken file is refused and logged; the running config stays.
    await writeFile(file, 'tenants: [{ id: "Not Valid" }]');
    await waitFor(() => proc.lines.some((l) => l.includes('config file rejected')), {
      timeoutMs: 10_000,
      what: 'the rejection log line',
    });
    expect((await client.configGet()).ok && (await client.configGet())).toMatchObject({
      ok: true,
      value: { version: 2 },
    });
  } finally {
    await proc.stop();
  }
  // A clean SIGTERM exits 0.
  expect(await proc.exited).toBe(0);
});

test('a started process says so on its started subject, once it answers: a settle sent on the notice lands', async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const client = new AuthorityClient({ nc, names: iso.names });
  // What an edge owing a close does on the notice (Holds.wake): send it now. A notice sent
  // before the process served would get no_responders at once; one it serves is answered,
  // however slowly a loaded box starts it (its 2 s default timed out at a load of 10-16).
  const answers: string[] = [];
  const notices = nc.subscribe(authorityStartedSubject(iso.names), {
    callback: () =>
      void client
        .settle(
          {
            reservationId: newId(),
            tenant: 'support-bot',
            usage: { promptTokens: 1, completionTokens: 1 },
          },
          SETTLE_TIMEOUT_MS,
        )
        .then((r) => answers.push(r.ok ? r.value.status : r.error.code)),
  });
  await nc.flush();
  const { proc } = await startProcess({ natsUrl, redisUrl, iso });
  try {
    await waitFor(() => answers.length === 1, {
      timeoutMs: SETTLE_TIMEOUT_MS + 5_000,
      what: 'the settle sent on the notice',
    });
    expect(answers).toEqual(['unknown']);
  } finally {
    notices.unsubscribe();
    await proc.stop();
  }
});
