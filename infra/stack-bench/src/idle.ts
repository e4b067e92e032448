import { readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { readCpu } from './cpu.js';
import { BENCH_DIR, startBenchStack } from './stack.js';

/**
 * `pnpm --filter @holdfast/stack-bench bench:idle [--seconds S] [--rounds N] [--settle S]
 * [--cpu-prof edge,authority]`: the bench's stack with no calls at all, CPU of each process
 * from /proc (ms of CPU a second) over `rounds` windows of `seconds`, after `settle` seconds.
 */
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '2' },
    settle: { type: 'string', default: '10' },
    'cpu-prof': { type: 'string', default: '' },
  },
  strict: true,
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const settle = Number(values.settle);
const cpuProf = values['cpu-prof'].split(',').filter((x) => x !== '');
/** Voluntary context switches of all threads of a process so far (its wake-ups). */
function wakeups(pid: number): number {
  let n = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
    n += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  }
  return n;
}
const readWakeups = (pids: Record<string, number>) =>
  Object.fromEntries(Object.entries(pids).map(([n, pid]) => [n, wakeups(pid)]));

const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1_000));

const dir = join(BENCH_DIR, `idle-${new Date().toISOString().replace(/[:.]/g, '-')}`);
const { group, started } = await startBenchStack({
  dir,
  completionTokens: 16,
  cpuProf,
  floor: false,
});
let code = 0;
try {
  const stack = await started;
  const pids = Object.fromEntries(
    Object.entries(stack.pids).filter(([name]) => name !== 'bare-proxy'),
  );
  say(`idle: stack up in ${dir}; settling ${settle} s`);
  await sleep(settle);
  for (let round = 1; round <= rounds; round++) {
    const before = readCpu(pids);
    const woke = readWakeups(pids);
    const t0 = performance.now();
    await sleep(seconds);
    const after = readCpu(pids);
    const wokeAfter = readWakeups(pids);
    const elapsedS = (performance.now() - t0) / 1_000;
    const ms = (name: string) => (after[name]! - before[name]!) / 1_000 / elapsedS;
    const services = ['authority', 'alerter', 'edge', 'aggregator'];
    const total = services.reduce((a, n) => a + ms(n), 0);
    const rest = Object.keys(pids).filter((n) => !services.includes(n));
    say(
      `round ${round}: ms of CPU a second over ${elapsedS.toFixed(1)} s: ` +
        [...services, ...rest].map((n) => `${n} ${ms(n).toFixed(2)}`).join(', ') +
        `; the four services ${total.toFixed(2)}`,
    );
    say(
      `         wake-ups a second: ` +
        [...services, ...rest]
          .map((n) => `${n} ${((wokeAfter[n]! - woke[n]!) / elapsedS).toFixed(0)}`)
          .join(', '),
    );
  }
} catch (err) {
  process.stderr.write(`idle failed: ${err instanceof Error ? err.message : String(err)}\n`);
  code = 1;
}
await group.stop();
if (cpuProf.length === 0) await rm(dir, { recursive: true, force: true });
else say(`CPU profiles: ${join(dir, 'profiles')}`);
process.exit(code);
