/**
 * `pnpm --filter @holdfast/billing-aggregator bench:accept [--base <checkout>] [--rounds N]`:
 * the aggregator's per-event work (`BatchCommit.accept`: the event's parse and check, its row's
 * RowBinary bytes) of this checkout's `dist` against another's, alternated round by round in one
 * process, on `bench:consumers`' calls (a created and a settled event, three windows each). Each
 * round takes 300,000 deliveries and keeps a batch's 3,000 rows waiting, as the batcher does.
 * Reported: µs of the process's CPU (every thread: V8's GC helpers too) and of wall time an event.
 */
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { EVENT_EXAMPLES, EXAMPLE_WINDOW } from '@holdfast/events/testing';

const { values } = parseArgs({
  options: {
    base: { type: 'string', default: '/work/main' },
    rounds: { type: 'string', default: '6' },
  },
});
const EVENTS = 300_000;
const BATCH = 3_000;

interface Commit {
  accept(msg: unknown): unknown;
}

async function load(root: string): Promise<Commit> {
  const url = pathToFileURL(resolve(root, 'services/billing-aggregator/dist/batch-commit.js'));
  const mod = (await import(url.href)) as { BatchCommit: new (o: unknown) => Commit };
  const unused = () => {
    throw new Error('not in this bench');
  };
  return new mod.BatchCommit({ deadLetters: { term: unused }, ackWaitMs: 30_000 });
}

/** 2,000 distinct deliveries: a call's created and settled, as the authority publishes them. */
function deliveries(): Array<{ data: Uint8Array; reply: string }> {
  const windows = [
    EXAMPLE_WINDOW,
    { ...EXAMPLE_WINDOW, budget: 'day-usd', window: 'day', unit: 'usd' },
    { ...EXAMPLE_WINDOW, tenant: 'acme', budget: 'month-usd', unit: 'usd' },
  ];
  const out: Array<{ data: Uint8Array; reply: string }> = [];
  for (let i = 0; i < 1_000; i++) {
    for (const type of ['reservation.created', 'reservation.settled'] as const) {
      const e = { ...EVENT_EXAMPLES[type], id: randomUUID(), windows };
      const seq = out.length + 1;
      out.push({
        data: new TextEncoder().encode(JSON.stringify(e)),
        reply: `$JS.ACK.events.billing.1.${seq}.${seq}.1765100000000000000.0`,
      });
    }
  }
  return out;
}

function round(commit: Commit, msgs: ReturnType<typeof deliveries>): [cpu: number, wall: number] {
  const kept: unknown[] = [];
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < EVENTS; i++) {
    kept.push(commit.accept(msgs[i % msgs.length]));
    if (kept.length === BATCH) kept.length = 0;
  }
  const wall = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  return [(used.user + used.system) / EVENTS, (wall * 1000) / EVENTS];
}

const msgs = deliveries();
const trees = [
  { name: 'base', commit: await load(values.base) },
  { name: 'this', commit: await load(resolve(import.meta.dirname, '../../..')) },
];
for (const t of trees) round(t.commit, msgs); // warm up both
for (let r = 0; r < Number(values.rounds); r++) {
  for (const t of trees) {
    const [cpu, wall] = round(t.commit, msgs);
    console.log(
      `round ${r + 1} ${t.name}: ${cpu.toFixed(2)} µs CPU, ${wall.toFixed(2)} µs wall an event`,
    );
  }
}
