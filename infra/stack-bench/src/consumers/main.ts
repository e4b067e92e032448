import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { eventSubject, DEFAULT_NAMES, type HoldfastEvent } from '@holdfast/events';
import { REPO_ROOT } from '@holdfast/stack';
import {
  serverBinary,
  startClickHouseServer,
  startNatsServer,
  startService,
  waitFor,
  type LocalServer,
  type ServiceProcess,
} from '@holdfast/testkit/infra';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { parseStatCpu, readCpu, readSyscalls } from '../cpu.js';
import { BENCH_DIR } from '../stack.js';
import { StackCalls } from './events.js';
import { tallyGc } from './gc-trace.js';

/**
 * `pnpm --filter @holdfast/stack-bench bench:consumers`: the two consumers of the events
 * stream (the billing aggregator and the alerter), each its real process from `dist/main.js`,
 * against a nats-server and a clickhouse-server of their own on free ports, fed the events
 * of `pnpm bench:stack`'s calls (a created and a settled event per call, an org and three
 * windows) at a fixed rate, published in rounds every `--tick-ms` as the authority's outbox
 * relay does. Per run: each consumer's CPU (utime + stime from /proc/<pid>/stat) and its write
 * and read system calls (syscw, syscr from /proc/<pid>/io) over the run and its settle (until
 * both have acked every event), per event; with `--node-args --trace-gc`, its collections.
 */
const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '600' },
    seconds: { type: 'string', default: '20' },
    runs: { type: 'string', default: '2' },
    warmup: { type: 'string', default: '5' },
    'tick-ms': { type: 'string', default: '5' },
    only: { type: 'string', default: 'aggregator,alerter,raw' },
    /** Flags for node in front of each consumer's entry: `--node-args=--trace-gc`. */
    'node-args': { type: 'string', default: '' },
    /** Consumers run with --cpu-prof (profiles under .tmp/bench-stack/consumers-<time>/). */
    'cpu-prof': { type: 'string', default: '' },
    /** Another checkout whose built services to run (the code before a change). */
    root: { type: 'string', default: REPO_ROOT },
  },
  strict: true,
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const tickMs = Number(values['tick-ms']);
const root = resolve(values.root);
const CONFIG = fileURLToPath(new URL('../../bench-config.yaml', import.meta.url));

const RAW_ENTRY = fileURLToPath(new URL('./raw-consumer.js', import.meta.url));
const CONSUMERS = {
  aggregator: {
    entry: join(root, 'services/billing-aggregator/dist/main.js'),
    durable: 'billing-aggregator',
  },
  alerter: { entry: join(root, 'services/alerter/dist/main.js'), durable: 'alerter' },
  /** The raw path: consume, parse, ack (raw-consumer.ts). */
  raw: { entry: RAW_ENTRY, durable: 'bench-raw' },
  /** The same, fed by a no_wait pull every 250 ms (deliveries in bursts). */
  'raw-burst': { entry: RAW_ENTRY, durable: 'bench-raw-burst' },
} as const;
type Consumer = keyof typeof CONSUMERS;
const only = values.only.split(',').filter((n): n is Consumer => n in CONSUMERS);
const profiled = values['cpu-prof'].split(',').filter((n) => n !== '');

/** The idle rate is read over this long before each run (CPU is counted in 10 ms ticks). */
const IDLE_MS = 5_000;
const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Counters {
  cpu: number;
  /** The main thread's share of `cpu` (the rest: V8's GC and compiler threads, libuv's pool). */
  mainCpu: number;
  writes: number;
  reads: number;
  /** Lines the process printed so far (its --trace-gc lines among them). */
  lines: number;
}

function counters(procs: Map<Consumer, ServiceProcess>): Map<Consumer, Counters> {
  const pids = Object.fromEntries([...procs].map(([n, p]) => [n, p.child.pid!]));
  const cpu = readCpu(pids);
  const calls = readSyscalls(pids);
  return new Map(
    [...procs].map(([n, p]) => {
      const pid = p.child.pid!;
      const mainCpu = parseStatCpu(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8'));
      return [n, { cpu: cpu[n]!, mainCpu, ...calls[n]!, lines: p.lines.length }];
    }),
  );
}

/** Every event published is acked by every consumer running. */
async function quiescent(jsm: JetStreamManager): Promise<boolean> {
  for (const name of only) {
    const c = await jsm.consumers.info(DEFAULT_NAMES.eventsStream, CONSUMERS[name].durable);
    if (c.num_pending > 0 || c.num_ack_pending > 0) return false;
  }
  return true;
}

async function clickhouseCount(url: string, final: boolean): Promise<number> {
  const query = `SELECT count() FROM holdfast.events_raw_v1${final ? ' FINAL' : ''}`;
  const res = await fetch(`${url}/?query=${encodeURIComponent(query)}`);
  return Number((await res.text()).trim());
}

/** Each consumer's output (`<name>.log`) and CPU profiles. */
const runDir = join(BENCH_DIR, `consumers-${new Date().toISOString().replace(/[:.]/g, '-')}`);
const servers: LocalServer[] = [];
const procs = new Map<Consumer, ServiceProcess>();
try {
  const nats = await startNatsServer(serverBinary('nats'));
  servers.push(nats);
  const clickhouse = await startClickHouseServer(serverBinary('clickhouse'));
  servers.push(clickhouse);
  await mkdir(runDir, { recursive: true });
  const env: Record<Consumer, Record<string, string>> = {
    aggregator: {
      CLICKHOUSE_URL: clickhouse.url,
      BILLING_AGGREGATOR_OPS_PORT: '0',
      BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '0',
    },
    alerter: { HOLDFAST_CONFIG: CONFIG, ALERTER_OPS_PORT: '0' },
    raw: {},
    'raw-burst': { RAW_DURABLE: 'bench-raw-burst', RAW_PULL_EVERY_MS: '250' },
  };
  for (const name of only) {
    const nodeArgs = [
      ...values['node-args'].split(' ').filter((a) => a !== ''),
      ...(profiled.includes(name) ? ['--cpu-prof', `--cpu-prof-dir=${runDir}`] : []),
    ];
    const { entry } = CONSUMERS[name];
    procs.set(name, await startService(entry, { NATS_URL: nats.url, ...env[name] }, { nodeArgs }));
  }
  say(
    `bench:consumers: ${only.join(', ')} from ${root}; ${rate} events/s (${rate / 2} calls/s) for ${seconds} s, rounds every ${tickMs} ms`,
  );

  const nc = await connect({ servers: nats.url, name: 'bench-publisher' });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const calls = new StackCalls();
  let published = 0;
  /** Publishes `rate` events a second for `ms`, in rounds; resolves once all are stored. */
  const publish = async (ms: number): Promise<number> => {
    const start = performance.now();
    const total = Math.round((rate * ms) / 1_000);
    const acks: Promise<unknown>[] = [];
    const queue: HoldfastEvent[] = [];
    let sent = 0;
    while (sent < total) {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1_000) + 1);
      for (; sent < due; sent++) {
        if (queue.length === 0) queue.push(...calls.next(Date.now()));
        const e = queue.shift()!;
        const subject = eventSubject(DEFAULT_NAMES, e.tenant, e.type);
        acks.push(js.publish(subject, JSON.stringify(e), { msgID: e.id }));
      }
      await sleep(tickMs);
    }
    await Promise.all(acks);
    published += total;
    return total;
  };
  const settle = () =>
    waitFor(() => quiescent(jsm), {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: 'every event acked',
    });

  await publish(Number(values.warmup) * 1_000);
  await settle();
  for (let run = 1; run <= Number(values.runs); run++) {
    // The idle rate first: what each consumer spends a second with nothing to do.
    const idle0 = counters(procs);
    await sleep(IDLE_MS);
    const idle1 = counters(procs);
    const before = counters(procs);
    const t0 = performance.now();
    const n = await publish(seconds * 1_000);
    await settle();
    const after = counters(procs);
    const elapsedS = (performance.now() - t0) / 1_000;
    say(`run ${run}: ${n} events in ${elapsedS.toFixed(1)} s (publish and settle)`);
    for (const [name, p] of procs) {
      const a = after.get(name)!;
      const b = before.get(name)!;
      const idle = (idle1.get(name)!.cpu - idle0.get(name)!.cpu) / IDLE_MS;
      const gc = [...tallyGc(p.lines.slice(b.lines, a.lines))]
        .map(([k, t]) => `${k} ${t.count} x, ${(t.pauseMs + t.stepsMs).toFixed(0)} ms`)
        .join('; ');
      say(
        `  ${name.padEnd(10)} ${((a.cpu - b.cpu) / n).toFixed(1).padStart(6)} µs CPU/event ` +
          `(main thread ${((a.mainCpu - b.mainCpu) / n).toFixed(1)})  ` +
          `${((a.writes - b.writes) / n).toFixed(3)} writes/event  ${((a.reads - b.reads) / n).toFixed(3)} reads/event  ` +
          `(idle ${idle.toFixed(1)} ms CPU/s)${gc ? `\n             GC: ${gc}` : ''}`,
      );
    }
  }
  if (procs.has('aggregator')) {
    const [rows, final] = [
      await clickhouseCount(clickhouse.url, false),
      await clickhouseCount(clickhouse.url, true),
    ];
    say(`aggregator: ${published} events published, ${rows} rows inserted, ${final} after FINAL`);
    if (final !== published) process.exitCode = 1;
  }
  await nc.drain();
} finally {
  for (const [name, p] of [...procs].reverse()) {
    await p.stop();
    await writeFile(join(runDir, `${name}.log`), p.lines.join('\n'));
  }
  for (const s of servers.reverse()) await s.stop();
}
say(`logs${profiled.length > 0 ? ' and profiles' : ''} in ${runDir}`);
