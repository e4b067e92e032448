/**
 * bench:accept's `BENCH_CALLGRIND=1` mode: instructions an event, counted by valgrind's
 * callgrind (the same code gives the same count within ~1% on a busy box, where CPU times
 * spread by ±15%). Each figure is two runs of a plain-JS loop under callgrind, one of
 * `--events` steps after a warm-up of one pass over the deliveries and one of the warm-up
 * alone: their difference over `--events` (startup, imports, ajv's compile and the first
 * tier-ups cancel out). The loop is plain JS given to `node -e`: tsx under valgrind takes
 * minutes to start. Stages: `json` (TextDecoder and JSON.parse: the floor of any parse),
 * `parse` (`parseEvent` of packages/events), `accept` (`BatchCommit.accept`: the parse and
 * the row's bytes).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBinary } from '@holdfast/testkit/infra';
import type { Delivery } from './deliveries.js';

export const STAGES = ['json', 'parse', 'accept'] as const;
export type Stage = (typeof STAGES)[number];

const LOOP = `
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [root, stage, n, file] = process.argv.slice(1);
const encoder = new TextEncoder();
const msgs = JSON.parse(readFileSync(file, 'utf8')).map(([text, reply]) => ({ data: encoder.encode(text), reply }));
const from = (path) => import(pathToFileURL(root + '/' + path).href);
let step;
if (stage === 'json') {
  const decoder = new TextDecoder();
  step = (m) => JSON.parse(decoder.decode(m.data));
} else if (stage === 'parse') {
  const { parseEvent } = await from('packages/events/dist/index.js');
  step = (m) => { const r = parseEvent(m.data); if (!r.ok) throw new Error(r.error.message); return r; };
} else {
  const { BatchCommit } = await from('services/billing-aggregator/dist/batch-commit.js');
  const commit = new BatchCommit({ deadLetters: { term() { throw new Error('poison'); } }, ackWaitMs: 30000 });
  step = (m) => commit.accept(m);
}
const kept = [];
const run = (count) => {
  for (let i = 0; i < count; i++) {
    kept.push(step(msgs[i % msgs.length]));
    if (kept.length === 3000) kept.length = 0;
  }
};
run(msgs.length);
run(Number(n));
`;

interface Job {
  root: string;
  stage: Stage;
  events: number;
}

/** Instructions of the whole `node` process running the loop, from callgrind's totals. */
function instructions(dir: string, file: string, job: Job, i: number): Promise<number> {
  const out = join(dir, `cg.${i}.out`);
  const args = ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`];
  const loop = ['--input-type=module', '-e', LOOP, job.root, job.stage, String(job.events), file];
  const valgrind = findBinary('valgrind');
  if (!valgrind) throw new Error('valgrind is not on PATH: apt-get install -y valgrind');
  return new Promise((resolve, reject) => {
    const child = spawn(valgrind, [...args, process.execPath, ...loop], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`valgrind exited ${code} on ${JSON.stringify(job)}`));
      const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(out, 'utf8'));
      rmSync(out);
      if (!totals) return reject(new Error(`no totals in ${out}`));
      resolve(Number(totals[1]));
    });
  });
}

/** Runs `jobs` under callgrind, `parallel` at a time, answering in their order. */
async function runAll(dir: string, file: string, jobs: Job[], parallel: number): Promise<number[]> {
  const counts: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) {
      const i = next++;
      counts[i] = await instructions(dir, file, jobs[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return counts;
}

/** Prints instructions an event, by round, tree and stage. */
export async function countInstructions(
  msgs: Delivery[],
  o: {
    trees: Array<{ name: string; root: string }>;
    stages: Stage[];
    rounds: number;
    events: number;
    parallel: number;
  },
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'holdfast-accept-cg-'));
  const file = join(dir, 'deliveries.json');
  const text = new TextDecoder();
  writeFileSync(file, JSON.stringify(msgs.map((m) => [text.decode(m.data), m.reply])));
  try {
    for (let r = 1; r <= o.rounds; r++) {
      const cells = o.trees.flatMap((t) => o.stages.map((stage) => ({ ...t, stage })));
      const jobs = cells.flatMap((c) => [0, o.events].map((events) => ({ ...c, events })));
      const counts = await runAll(dir, file, jobs, o.parallel);
      cells.forEach((c, i) => {
        const per = (counts[2 * i + 1]! - counts[2 * i]!) / o.events;
        console.log(`round ${r} ${c.name} ${c.stage}: ${Math.round(per)} instructions an event`);
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
