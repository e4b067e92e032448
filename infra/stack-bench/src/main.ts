import { execFileSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { REPO_ROOT } from '@holdfast/stack';
import { parseFlags, USAGE, type Flags } from './flags.js';
import { LoadGenerator } from './load/driver.js';
import { renderMedians } from './medians.js';
import { NatsMonitor } from './nats-monitor.js';
import { plan, runPhase, type PhaseDeps, type PhaseResult, type PhaseSpec } from './phase.js';
import { readEarlier, renderComparison, SCHEMA, type BenchResult } from './result.js';
import { RedisStats } from './redis-stats.js';
import { BENCH_DIR, startBenchStack, type BenchStack } from './stack.js';
import { FLOOR, HOLDFAST, summarise } from './summary.js';
import { renderReport } from './table.js';
import { checkTargets, targets } from './targets.js';

/** `pnpm bench:stack`: see USAGE in flags.ts and docs/benchmarks.md. */
const say = (line: string) => process.stdout.write(`${line}\n`);

function flagsOrExit(): Flags {
  try {
    return parseFlags(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench:stack: ${(err as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
}

function commit(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: REPO_ROOT })
      .toString()
      .trim();
  } catch {
    return 'unknown';
  }
}

function progress(spec: PhaseSpec, r: PhaseResult, rounds: number): string {
  const sum = (names: readonly string[]) =>
    names.map((k) => r.cpu[k] ?? NaN).reduce((a, b) => a + b, 0);
  const perCall = (us: number) => `${(us / r.client.calls).toFixed(0)} µs/call`;
  const cpu = {
    direct: '',
    proxy: `, bare proxy ${perCall(r.cpu['bare-proxy'] ?? NaN)}`,
    stack: `, Holdfast ${perCall(sum(HOLDFAST))}`,
    floor: `, floor ${perCall(sum(FLOOR))}`,
    'floor-single': `, floor ${perCall(sum(FLOOR))}`,
  }[spec.target];
  const errors =
    r.client.errors > 0 ? `, ${r.client.errors} errors: ${r.client.errorSamples[0]}` : '';
  return (
    `  round ${spec.round + 1}/${rounds}  ${spec.load.padEnd(18)} ${spec.target.padEnd(12)} ` +
    `${r.client.perSecond.toFixed(0).padStart(6)} calls/s  p50 ${r.client.p50.toFixed(2)} ms  ` +
    `p99 ${r.client.p99.toFixed(2)} ms${cpu}${errors}`
  );
}

async function measure(
  flags: Flags,
  stack: BenchStack,
  load: LoadGenerator,
): Promise<PhaseResult[]> {
  const redis = new RedisStats(stack.redisUrl, 10_000);
  await redis.connect();
  try {
    const deps: PhaseDeps = {
      load,
      nats: new NatsMonitor(stack.natsMonitorUrl),
      redis,
      pids: { ...stack.pids, 'load generator': load.pid, 'bench runner': process.pid },
      targets: targets(stack),
      seconds: flags.seconds,
    };
    await checkTargets(deps.targets, flags.completionTokens);
    say('warming up (3 s a target)');
    for (const t of Object.values(deps.targets)) {
      await load.run(t.plain, { mode: 'closed', connections: flags.connections }, 3);
    }
    await deps.nats.settle({ quietMs: 300, timeoutMs: 20_000 });
    const phases: PhaseResult[] = [];
    for (const spec of plan({ ...flags, floor: !flags.skipFloor })) {
      const r = await runPhase(spec, deps);
      say(progress(spec, r, flags.rounds));
      phases.push(r);
    }
    return phases;
  } finally {
    await redis.close();
  }
}

const flags = flagsOrExit();
if (flags.help) {
  say(USAGE);
  process.exit(0);
}
const cwd = process.env.INIT_CWD ?? process.cwd();
if (flags.medians) {
  say(await renderMedians(flags.medians.map((p) => resolve(cwd, p))));
  process.exit(0);
}
const startedAt = new Date();
const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
const dir = join(BENCH_DIR, `run-${stamp}`);
const out = flags.out ? resolve(cwd, flags.out) : join(BENCH_DIR, `${stamp}.json`);
const earlier = flags.against ? await readEarlier(resolve(cwd, flags.against)) : undefined;
const loadAverage = loadavg()[0]!;
const cores = availableParallelism();

say(`bench:stack: starting the stack in ${dir} (load average ${loadAverage.toFixed(2)})`);
const { group, started, tail } = await startBenchStack({
  dir,
  completionTokens: flags.completionTokens,
  cpuProf: flags.cpuProf,
  floor: !flags.skipFloor,
});
const load = new LoadGenerator();
let stopping = false;
async function stopAll(): Promise<void> {
  stopping = true;
  await load.stop();
  await group.stop();
  if (!flags.keep && flags.cpuProf.length === 0) await rm(dir, { recursive: true, force: true });
}
const onSignal = () => {
  if (stopping) group.kill();
  void stopAll().finally(() => process.exit(130));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
process.on('exit', () => group.kill());

let code = 0;
try {
  const stack = await started;
  await load.ready;
  // A process that dies mid-run ends the run (its last lines are printed below).
  const died = group.firstExit().then(({ name, exit }) => {
    if (stopping) return [];
    throw new Error(`${name} exited (${exit.signal ?? `code ${exit.code}`}) during the run`);
  });
  died.catch(() => undefined);
  const phases = await Promise.race([measure(flags, stack, load), died]);
  const summary = summarise(phases, cores);
  const { help: _help, ...recorded } = flags;
  const result: BenchResult = {
    schema: SCHEMA,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    commit: commit(),
    node: process.version,
    cores,
    loadAverage,
    flags: recorded,
    summary,
    phases,
  };
  const header =
    `bench:stack ${result.commit}: ${flags.rounds} rounds x ${flags.seconds} s a phase, direct, ` +
    `bare proxy, stack${flags.skipFloor ? '' : ' and floor'} interleaved; chat completions with ${flags.completionTokens}-token ` +
    `replies from the mock at zero latency; medians over rounds (${process.version}, ` +
    `${cores} cores, load average ${loadAverage.toFixed(2)} at start)`;
  say(`\n${renderReport(summary, header)}`);
  if (earlier) say(renderComparison(earlier, summary));
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(result, null, 2)}\n`);
  say(`JSON: ${out}`);
  if (flags.cpuProf.length > 0) say(`CPU profiles (on exit): ${join(dir, 'profiles')}`);
} catch (err) {
  process.stderr.write(`bench:stack failed: ${err instanceof Error ? err.message : String(err)}\n`);
  for (const p of group.processes.filter((x) => !x.running)) {
    process.stderr.write(`last lines of ${p.name}:\n  ${tail(p.name).join('\n  ')}\n`);
  }
  code = 1;
}
await stopAll();
process.exit(code);
