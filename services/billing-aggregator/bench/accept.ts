/**
 * `pnpm --filter @holdfast/billing-aggregator bench:accept [--base <checkout>] [--rounds N]`:
 * the aggregator's per-event work (`BatchCommit.accept`: the event's parse and check, its row's
 * RowBinary bytes) of this checkout's `dist` against another's, alternated round by round in one
 * process, on `bench:consumers`' calls (a created and a settled event, three windows each). Each
 * round takes 300,000 deliveries and keeps a batch's 3,000 rows waiting, as the batcher does.
 * Reported: µs of the process's CPU (every thread: V8's GC helpers too) and of wall time an event.
 *
 * `BENCH_CALLGRIND=1 ... bench:accept [--base <checkout>] [--rounds N] [--events 20000]
 * [--stages json,parse,accept] [--parallel 2]`: instructions an event instead, counted by
 * valgrind's callgrind (accept-callgrind.ts), the same trees alternated round by round.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { countInstructions, STAGES, type Stage } from './accept-callgrind.js';
import { deliveries, type Delivery } from './deliveries.js';

const { values } = parseArgs({
  options: {
    base: { type: 'string', default: '/work/main' },
    rounds: { type: 'string', default: '6' },
    // BENCH_CALLGRIND=1 only: steps counted a run, the stages, valgrinds at a time.
    events: { type: 'string', default: '20000' },
    stages: { type: 'string', default: STAGES.join(',') },
    parallel: { type: 'string', default: '2' },
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

function round(commit: Commit, msgs: Delivery[]): [cpu: number, wall: number] {
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
const roots = { base: resolve(values.base), this: resolve(import.meta.dirname, '../../..') };
if (process.env.BENCH_CALLGRIND === '1') {
  await countInstructions(msgs, {
    trees: Object.entries(roots).map(([name, root]) => ({ name, root })),
    stages: values.stages.split(',') as Stage[],
    rounds: Number(values.rounds),
    events: Number(values.events),
    parallel: Number(values.parallel),
  });
} else {
  await timeRounds(msgs);
}

async function timeRounds(msgs: Delivery[]): Promise<void> {
  const trees = [
    { name: 'base', commit: await load(roots.base) },
    { name: 'this', commit: await load(roots.this) },
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
}
