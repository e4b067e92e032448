import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_NAMES, eventSubject, HoldfastEvent } from '@holdfast/events';
import { REPO_ROOT } from '@holdfast/stack';
import {
  serverBinary,
  startNatsServer,
  startService,
  waitFor,
  type ServiceProcess,
} from '@holdfast/testkit/infra';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { readCpu } from '../cpu.js';
import { StackCalls } from './events.js';

/**
 * `pnpm --filter @holdfast/stack-bench bench:alerter-backlog`: how many events a second the
 * alerter's events consumer works through when they wait for it (webhook.backlog.int.test.ts:
 * a busy team's 10,200 settlements ahead of another team's crossing). Per trial: a fresh
 * nats-server; the alerter (its real process, `dist/main.js` of `--root` or `--base`) started
 * once to create its durable and stopped; `--events` events stored; the alerter started again,
 * and from its `ready` until its durable has acked every event, the wall time (events/s) and
 * the process's CPU (/proc, µs per event). Trials alternate base and new, `--runs` of each, so
 * the two are compared within one sitting (the box's load moves wall times by 20-50%).
 *
 * `--mix busy`: the test's busy team, settlements without windows, each wanted by a webhook
 * that answers 500 (retried a minute on). `--mix stack`: `bench:stack`'s calls (a created and
 * a settled event, three windows), the settlements wanted by that webhook. `--mix plain`: the
 * same calls, no webhook.
 */
const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '10200' },
    runs: { type: 'string', default: '2' },
    mix: { type: 'string', default: 'busy' },
    /** The checkout of the code before a change (its built services); none: only `--root`. */
    base: { type: 'string', default: '' },
    root: { type: 'string', default: REPO_ROOT },
    /** The second start of each alerter runs with --cpu-prof, its profile written here. */
    'cpu-prof': { type: 'string', default: '' },
  },
  strict: true,
});
const total = Number(values.events);
const mix = values.mix;
if (!['busy', 'stack', 'plain'].includes(mix)) throw new Error(`--mix busy|stack|plain`);
const roots = [
  ...(values.base ? [{ name: 'base', root: resolve(values.base) }] : []),
  { name: 'new', root: resolve(values.root) },
];
const CONFIG = fileURLToPath(new URL('../../bench-config.yaml', import.meta.url));
const say = (line: string) => process.stdout.write(`${line}\n`);

/** The test's busy team's settlement: one token, no window moved. */
function busySettlement(): HoldfastEvent {
  return HoldfastEvent.parse({
    id: randomUUID(),
    schemaVersion: 1,
    time: new Date().toISOString(),
    tenant: 'bench-team',
    org: 'bench-org',
    type: 'reservation.settled',
    reservationId: randomUUID(),
    keyId: null,
    useCase: 'UC-BENCH',
    model: 'gpt-4o-mini',
    mode: 'reserve',
    api: 'chat',
    heldTokens: 1,
    heldMicroUsd: 0,
    promptTokens: 0,
    completionTokens: 1,
    cachedPromptTokens: 0,
    cacheWrite5mTokens: 0,
    cacheWrite1hTokens: 0,
    reasoningTokens: 0,
    audioPromptTokens: 0,
    audioCompletionTokens: 0,
    billedTokens: 1,
    costMicroUsd: 0,
    chargedTokens: 1,
    chargedMicroUsd: 0,
    outcome: 'completed',
    durationMs: 100,
    windows: [],
  });
}

function events(n: number): HoldfastEvent[] {
  if (mix === 'busy') return Array.from({ length: n }, busySettlement);
  const calls = new StackCalls();
  const out: HoldfastEvent[] = [];
  while (out.length < n) out.push(...calls.next(Date.now()));
  return out.slice(0, n);
}

/** A receiver that answers every delivery with `status`. */
async function receiver(status: number): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(status).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('receiver has no port');
  return { url: `http://127.0.0.1:${address.port}/hook`, server };
}

async function trial(name: string, root: string, dir: string): Promise<void> {
  const nats = await startNatsServer(serverBinary('nats'));
  const hook = await receiver(500);
  let alerter: ServiceProcess | undefined;
  try {
    const config = join(dir, `config-${name}.yaml`);
    const webhooks =
      mix === 'plain'
        ? 'webhooks: []'
        : `webhooks:\n  - { id: usage, url: '${hook.url}', secretEnv: HOOK_SECRET, events: [reservation.settled] }`;
    await writeFile(config, readFileSync(CONFIG, 'utf8').replace('webhooks: []', webhooks));
    const entry = join(root, 'services/alerter/dist/main.js');
    const env = {
      NATS_URL: nats.url,
      HOLDFAST_CONFIG: config,
      ALERTER_OPS_PORT: '0',
      HOOK_SECRET: `whsec_${Buffer.from('holdfast alerter bench secret 32').toString('base64')}`,
      ALERTER_WEBHOOK_RETRY_INITIAL_MS: '60000',
    };
    // Once to create the durable (new events only), then the events wait for the next start.
    await (await startService(entry, env)).stop();
    const nc = await connect({ servers: nats.url, name: 'bench-publisher' });
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const list = events(total);
    const queue = [...list];
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        for (let e = queue.shift(); e; e = queue.shift()) {
          await js.publish(eventSubject(DEFAULT_NAMES, e.tenant, e.type), JSON.stringify(e), {
            msgID: e.id,
          });
        }
      }),
    );
    const prof = values['cpu-prof'];
    const nodeArgs = prof ? ['--cpu-prof', `--cpu-prof-dir=${resolve(prof, name)}`] : [];
    alerter = await startService(entry, env, { nodeArgs });
    const pid = alerter.child.pid!;
    const cpu0 = readCpu({ a: pid }).a!;
    const t0 = performance.now();
    await waitFor(
      async () => {
        const c = await jsm.consumers.info(DEFAULT_NAMES.eventsStream, 'alerter');
        return c.num_pending === 0 && c.num_ack_pending === 0;
      },
      { timeoutMs: 300_000, intervalMs: 50, what: 'every event acked by the alerter' },
    );
    const seconds = (performance.now() - t0) / 1_000;
    const cpu = readCpu({ a: pid }).a! - cpu0;
    // The deliverer's first attempt of every job (its work per event, done after the events
    // or beside them), so CPU per event counts the same work on both sides.
    if (mix !== 'plain') {
      await waitFor(
        async () =>
          (await jsm.consumers.info('HOLDFAST_WEBHOOK_JOBS', 'deliver-usage')).num_pending === 0,
        { timeoutMs: 300_000, intervalMs: 100, what: 'every job attempted' },
      );
    }
    const allCpu = readCpu({ a: pid }).a! - cpu0;
    say(
      `  ${name.padEnd(4)} ${total} events in ${seconds.toFixed(2)} s: ${(total / seconds).toFixed(0).padStart(6)} events/s, ` +
        `${(cpu / total).toFixed(1).padStart(6)} µs CPU/event until then, ${(allCpu / total).toFixed(1)} with every job attempted`,
    );
    await nc.drain();
  } finally {
    await alerter?.stop();
    await new Promise((r) => hook.server.close(r));
    await nats.stop();
  }
}

const dir = await mkdtemp(join(tmpdir(), 'alerter-backlog-'));
say(
  `bench:alerter-backlog: ${total} ${mix} events stored, then the alerter started; ${roots.map((r) => `${r.name} ${r.root}`).join(', ')}`,
);
for (let run = 1; run <= Number(values.runs); run++) {
  say(`run ${run}:`);
  for (const { name, root } of roots) await trial(name, root, dir);
}
