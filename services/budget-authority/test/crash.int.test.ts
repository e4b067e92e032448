import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { AuthorityClient } from '@holdfast/runtime';
import { infraTest as test, startService, waitFor, type ServiceProcess } from '@holdfast/testkit';
import { expect } from 'vitest';
import { newId, quiescent, readEvents } from './harness.js';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const TENANTS = ['team-a', 'team-b'];
const CONFIG = {
  upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
  models: [{ id: 'm', upstream: 'u', price: { inputPerMTok: 1, outputPerMTok: 2 } }],
  tenants: TENANTS.map((id) => ({
    id,
    budgets: [
      { window: 'day', limit: 50_000_000 },
      { window: 'month', limit: 5, unit: 'usd' },
    ],
    useCases: [{ id: 'uc', maxTokens: 1_000, models: ['m'] }],
  })),
};

/**
 * kill -9 of an authority replica in the middle of load. The client behaves like the edge: an
 * admit that gets no answer is released (a tombstone fences a late admit), a settle that gets
 * no answer is retried (settle is idempotent). Afterwards the books balance to the token and
 * every state change has exactly one event on JetStream.
 */
test('an authority replica killed with kill -9 mid-load loses no event and leaves the books balanced', async ({
  nc,
  natsUrl,
  redisUrl,
  redis,
  iso,
}) => {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-crash-'));
  const file = join(dir, 'config.json');
  await writeFile(file, JSON.stringify(CONFIG));
  const env = {
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    HOLDFAST_CONFIG: file,
    HOLDFAST_KEY_PREFIX: iso.keyPrefix,
    AUTHORITY_OPS_PORT: '0',
    AUTHORITY_RELAY_LEASE_MS: '1000',
    AUTHORITY_SWEEP_INTERVAL_MS: '200',
    ...natsNamesToEnv(iso.names),
  };
  const procs: ServiceProcess[] = [];
  for (let i = 0; i < 3; i++) procs.push(await startService(MAIN, env));
  const client = new AuthorityClient({ nc, names: iso.names, timeoutMs: 1_000 });

  const settledTokens = new Map<string, number>(TENANTS.map((t) => [t, 0]));
  const admittedIds = new Set<string>();
  const settledIds = new Set<string>();
  let timeouts = 0;
  let stop = false;

  const retry = async <T>(op: () => Promise<{ ok: boolean } & T>): Promise<T> => {
    for (;;) {
      const r = await op();
      if (r.ok) return r;
      timeouts++;
    }
  };
  const worker = async (w: number) => {
    for (let i = 0; !stop; i++) {
      const tenant = TENANTS[(w + i) % TENANTS.length]!;
      const reservationId = newId();
      const prompt = 10 + ((w * 7 + i * 13) % 500);
      const r = await client.admit({
        reservationId,
        tenant,
        keyId: null,
        useCase: 'uc',
        model: 'm',
        promptTokens: prompt,
        maxTokens: 200,
        leaseMs: 5_000,
      });
      if (!r.ok) {
        // No answer: the edge releases, which also fences an admit still in flight.
        timeouts++;
        await retry(() => client.release({ reservationId, tenant, reason: 'admit_abandoned' }));
        continue;
      }
      if (!r.value.admitted) continue;
      admittedIds.add(reservationId);
      const completion = (w + i) % 150;
      const s = await retry(() =>
        client.settle({
          reservationId,
          tenant,
          usage: { promptTokens: prompt, completionTokens: completion },
        }),
      );
      // 'already_settled': the first settle landed on the killed replica, its reply was lost.
      const status = 'value' in s ? (s.value as { status: string }).status : '';
      if (status === 'settled' || status === 'already_settled') {
        settledTokens.set(tenant, settledTokens.get(tenant)! + prompt + completion);
      }
      settledIds.add(reservationId);
    }
  };
  try {
    const load = Promise.all(Array.from({ length: 48 }, (_, w) => worker(w)));
    await waitFor(() => settledIds.size > 500, { timeoutMs: 30_000, what: 'load under way' });
    await procs[0]!.crash();
    await waitFor(() => settledIds.size > 1_500, {
      timeoutMs: 30_000,
      what: 'load after the crash',
    });
    stop = true;
    await load;

    const usage = await quiescent(client, redis, iso.keyPrefix);
    const events = await readEvents(nc, iso.names);

    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    const byKind = new Map<string, number>();
    for (const e of events) {
      if ('reservationId' in e && e.type !== 'admission.refused') {
        const k = `${e.reservationId}/${e.type}`;
        byKind.set(k, (byKind.get(k) ?? 0) + 1);
      }
    }
    expect([...byKind.values()].every((n) => n === 1)).toBe(true);
    for (const id of admittedIds) expect(byKind.has(`${id}/reservation.created`), id).toBe(true);
    for (const id of settledIds) expect(byKind.has(`${id}/reservation.settled`), id).toBe(true);

    for (const tenant of TENANTS) {
      const t = usage.tenants.find((x) => x.tenant === tenant)!;
      const fromEvents = events
        .filter((e) => e.tenant === tenant && e.type === 'reservation.settled')
        .reduce((s, e) => s + (e.type === 'reservation.settled' ? e.chargedTokens : 0), 0);
      expect(t.billedTokens, tenant).toBe(settledTokens.get(tenant));
      expect(fromEvents, tenant).toBe(settledTokens.get(tenant));
      expect(t.windows.find((w) => w.budget === 'day-tokens')?.used, tenant).toBe(
        settledTokens.get(tenant),
      );
    }
    console.log(
      `crash test: ${admittedIds.size} admitted, ${settledIds.size} settled, ${timeouts} requests timed out around the crash, ${events.length} events`,
    );
  } finally {
    stop = true;
    await Promise.all(procs.map((p) => p.stop()));
  }
});
