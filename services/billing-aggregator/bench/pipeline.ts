/**
 * Benchmark: events/s from JetStream into ClickHouse through the real aggregator process, and
 * its peak RSS while it drains a backlog.
 *
 *   pnpm --filter @holdfast/billing-aggregator bench      (root: pnpm bench)
 *
 * Env: BENCH_EVENTS (default 1,000,000: the backlog), BENCH_BATCH_SIZE (the aggregator's
 * BILLING_AGGREGATOR_BATCH_SIZE and the raw halves' batch, default the aggregator's default;
 * other BILLING_AGGREGATOR_* variables pass through to it), NATS_URL / CLICKHOUSE_URL (else
 * local nats-server and clickhouse-server are started on free ports), BENCH_CPU_PROF=<dir>
 * (a V8 CPU profile of the aggregator), BENCH_NODE_ARGS (extra node flags for it).
 *
 * It prints, from the same run: the raw JetStream consume+ack rates (three ways of acking) and
 * the raw ClickHouse insert rate (the two halves of the path), then the aggregator's end-to-end
 * rate, the CPU each process spent per event while it drained (aggregator, ClickHouse, NATS,
 * and how busy the whole machine was: on 2 shared cores the sum is the ceiling), and its peak RSS.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { eventSubject, namesWithPrefix, type NatsNames } from '@holdfast/events';
import { createLogger, ensureEventsStream } from '@holdfast/runtime';
import {
  serverBinary,
  type InfraName,
  startClickHouseServer,
  startNatsServer,
  type LocalServer,
} from '@holdfast/testkit/infra';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { loadConfig } from '../src/env.js';
import { toEventRow } from '../src/rows.js';
import { migrate } from '../src/migrate.js';
import { ident, qualified, sql } from '../src/sql.js';
import { settledCall } from '../test/events.js';
import { testClickHouse } from '../test/harness.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const BATCH = process.env.BENCH_BATCH_SIZE;
const RAW_SAMPLE = Math.min(EVENTS, 200_000);
const MAIN_JS = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function infra(): Promise<{
  natsUrl: string;
  clickhouseUrl: string;
  stop: () => Promise<void>;
}> {
  const started: LocalServer[] = [];
  const need = async (env: string, name: InfraName, start: (b: string) => Promise<LocalServer>) => {
    if (process.env[env]) return process.env[env];
    const s = await start(serverBinary(name));
    started.push(s);
    return s.url;
  };
  const natsUrl = await need('NATS_URL', 'nats', startNatsServer);
  const clickhouseUrl = await need('CLICKHOUSE_URL', 'clickhouse', startClickHouseServer);
  return {
    natsUrl,
    clickhouseUrl,
    stop: async () => void (await Promise.all(started.map((s) => s.stop()))),
  };
}

/** Publishes `n` settled events (distinct ids) with 1,024 publishes in flight. */
async function publishBacklog(nc: NatsConnection, names: NatsNames, n: number): Promise<void> {
  const js = jetstream(nc);
  const [, template] = settledCall({ tenant: 'bench', prompt: 370, completion: 512 });
  const json = JSON.stringify(template);
  const subject = eventSubject(names, 'bench', 'reservation.settled');
  const encoder = new TextEncoder();
  const inFlight = new Set<Promise<unknown>>();
  for (let i = 0; i < n; i++) {
    const id = randomUUID();
    const data = encoder.encode(
      json.replace(template.id, id).replace(template.reservationId, randomUUID()),
    );
    const h = headers();
    h.set('Nats-Msg-Id', id);
    const p = js.publish(subject, data, { headers: h }).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= 1_024) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}

/**
 * Deletes a bench consumer, best effort: nats-server 2.9 now and then fails the delete right
 * after a burst of acks ("unlinkat ... directory not empty"), and the stream with all its
 * consumers is deleted when the bench ends anyway.
 */
async function dropConsumer(jsm: JetStreamManager, names: NatsNames, durable: string) {
  await jsm.consumers.delete(names.eventsStream, durable).catch((err: unknown) => {
    console.error(`  (consumer ${durable} not deleted: ${String(err)})`);
  });
}

/**
 * The JetStream half alone: consume and ack `n` messages, doing nothing else. `acks`:
 * - 'each': one explicit ack per message as it arrives (one socket write per ack);
 * - 'batched': explicit acks of 2,000 messages in one loop (what the aggregator does);
 * - 'all': AckPolicy.All, one ack per 2,000 (cheapest, but unsafe with replicas sharing the
 *   consumer and incompatible with a nak; measured for docs/benchmarks.md, not used).
 */
async function rawConsume(
  nc: NatsConnection,
  names: NatsNames,
  n: number,
  acks: 'each' | 'batched' | 'all',
): Promise<number> {
  const jsm = await jetstreamManager(nc);
  const durable = `bench-raw-${acks}`;
  await jsm.consumers.add(names.eventsStream, {
    durable_name: durable,
    ack_policy: acks === 'all' ? AckPolicy.All : AckPolicy.Explicit,
    max_ack_pending: 50_000,
  });
  const consumer = await jetstream(nc).consumers.get(names.eventsStream, durable);
  const started = performance.now();
  const messages = await consumer.consume({ max_messages: 2_000 });
  let held: JsMsg[] = [];
  let seen = 0;
  for await (const m of messages) {
    seen++;
    if (acks === 'each') m.ack();
    else held.push(m);
    if (held.length === 2_000 || seen >= n) {
      if (acks === 'all') held.at(-1)?.ack();
      else for (const h of held) h.ack();
      held = [];
    }
    if (seen >= n) break;
  }
  const rate = n / ((performance.now() - started) / 1000);
  await dropConsumer(jsm, names, durable);
  return rate;
}

/** The ClickHouse half alone: insert `n` prepared rows into events_raw_v1, `batch` a time. */
async function rawInsert(clickhouseUrl: string, n: number, batch: number): Promise<number> {
  const ch = testClickHouse(clickhouseUrl);
  const database = `bench_raw_${Date.now().toString(36)}`;
  await migrate({ ch, database, logger: createLogger({ name: 'bench', level: 'warn' }) });
  const [, e] = settledCall({ tenant: 'bench' });
  const rows = Array.from({ length: batch }, (_, i) => ({ ...toEventRow(e, i), id: randomUUID() }));
  const table = qualified(database, 'events_raw_v1');
  const started = performance.now();
  for (let done = 0; done < n; done += batch) await ch.insert(table, rows);
  const rate = n / ((performance.now() - started) / 1000);
  await ch.command(sql`DROP DATABASE ${ident(database)}`);
  await ch.close();
  return rate;
}

/**
 * Both halves together, with no Holdfast in between: consume from JetStream, insert each
 * payload as one String column in batches, ack after the insert. The floor of what any
 * JetStream -> ClickHouse process can do on this machine while both servers share its cores.
 */
async function rawPipeline(
  nc: NatsConnection,
  names: NatsNames,
  clickhouseUrl: string,
  n: number,
  batch: number,
): Promise<number> {
  const jsm = await jetstreamManager(nc);
  await jsm.consumers.add(names.eventsStream, {
    durable_name: 'bench-pipe',
    ack_policy: AckPolicy.Explicit,
    max_ack_pending: batch * 2,
  });
  const ch = testClickHouse(clickhouseUrl);
  const database = `bench_pipe_${Date.now().toString(36)}`;
  await ch.command(sql`CREATE DATABASE ${ident(database)}`);
  const table = qualified(database, 'raw');
  await ch.command(sql`CREATE TABLE ${table} (payload String) ENGINE = MergeTree ORDER BY tuple()`);
  const consumer = await jetstream(nc).consumers.get(names.eventsStream, 'bench-pipe');
  const decoder = new TextDecoder();
  const started = performance.now();
  const messages = await consumer.consume({ max_messages: batch });
  let pending: { payload: string }[] = [];
  let acks: (() => void)[] = [];
  let seen = 0;
  for await (const m of messages) {
    pending.push({ payload: decoder.decode(m.data) });
    acks.push(() => m.ack());
    seen++;
    if (pending.length >= batch || seen >= n) {
      await ch.insert(table, pending);
      for (const ack of acks) ack();
      pending = [];
      acks = [];
    }
    if (seen >= n) break;
  }
  const rate = n / ((performance.now() - started) / 1000);
  await dropConsumer(jsm, names, 'bench-pipe');
  await ch.command(sql`DROP DATABASE ${ident(database)}`);
  await ch.close();
  return rate;
}

/** The service as a real process; resolves when it logs "ready". */
async function startAggregatorProcess(env: Record<string, string>): Promise<ChildProcess> {
  // BENCH_CPU_PROF=<dir>: write a V8 CPU profile of the aggregator there.
  const prof = process.env.BENCH_CPU_PROF;
  const args = [
    ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : []),
    ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    MAIN_JS,
  ];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`aggregator exited (${String(code)})`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.includes('"msg":"ready"')) resolve();
      else if (line.includes('"level":50') || line.includes('"level":60')) console.error(line);
    });
  });
  return child;
}

/** The pid of the process listening on a local TCP port (`ss -ltnp`), or undefined. */
function pidListeningOn(url: string): number | undefined {
  const port = new URL(url).port;
  const out = spawnSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' }).stdout ?? '';
  const pid = /pid=(\d+)/.exec(out)?.[1];
  return pid === undefined ? undefined : Number(pid);
}

/** CPU time (user + system) a process has used so far, in µs; 0 if it is gone. */
async function cpuMicros(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
}

/** Busy and total CPU time of the whole machine so far (/proc/stat), in ticks. */
async function machineTicks(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!;
  const t = line.trim().split(/\s+/).slice(1).map(Number);
  const total = t.reduce((a, b) => a + b, 0);
  return { busy: total - t[3]! - t[4]!, total };
}

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

interface CpuSnapshot {
  at: number;
  rows: number;
  procs: number[];
  machine: { busy: number; total: number };
}

async function rssOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

async function main(): Promise<void> {
  const { natsUrl, clickhouseUrl, stop } = await infra();
  const names = namesWithPrefix(`bench${Date.now().toString(36)}`);
  const database = `bench_${Date.now().toString(36)}`;
  const nc = await connect({ servers: natsUrl });
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, names);
  const ch = testClickHouse(clickhouseUrl);
  try {
    console.log(`billing-aggregator bench: ${fmt(EVENTS)} events backlog`);
    let t = performance.now();
    await publishBacklog(nc, names, EVENTS);
    console.log(
      `  published backlog            ${fmt(EVENTS / ((performance.now() - t) / 1000))} events/s`,
    );

    const batchSize = Number(BATCH ?? loadConfig({}).batch.maxRows);
    const consumeAck = [
      ['each', 'one ack per message'],
      ['batched', 'acks of 2,000 in one loop'],
      ['all', 'AckPolicy.All, one ack per 2,000'],
    ] as const;
    for (const [acks, how] of consumeAck) {
      console.log(
        `  raw JetStream consume+ack    ${fmt(await rawConsume(nc, names, RAW_SAMPLE, acks))} msgs/s (${fmt(RAW_SAMPLE)} msgs, ${how})`,
      );
    }
    console.log(
      `  raw ClickHouse insert        ${fmt(await rawInsert(clickhouseUrl, RAW_SAMPLE, batchSize))} rows/s (batches of ${fmt(batchSize)})`,
    );
    console.log(
      `  raw pipeline (both halves)   ${fmt(await rawPipeline(nc, names, clickhouseUrl, RAW_SAMPLE, batchSize))} events/s (consume, insert the payload as a String, ack)`,
    );

    t = performance.now();
    const service = await startAggregatorProcess({
      NATS_URL: natsUrl,
      CLICKHOUSE_URL: clickhouseUrl,
      CLICKHOUSE_DATABASE: database,
      BILLING_AGGREGATOR_OPS_PORT: '0',
      BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '0',
      ...(BATCH ? { BILLING_AGGREGATOR_BATCH_SIZE: BATCH } : {}),
      ...natsNamesToEnv(names),
    });
    const pid = service.pid!;
    // Who spends the CPU while draining: the aggregator and the two servers (when this bench
    // started them; a server given by URL may be elsewhere, its share is then not counted).
    const pids = [pid, pidListeningOn(clickhouseUrl), pidListeningOn(natsUrl)];
    const snapshot = async (rows: number): Promise<CpuSnapshot> => ({
      at: performance.now(),
      rows,
      procs: await Promise.all(pids.map(cpuMicros)),
      machine: await machineTicks(),
    });
    let peakRss = 0;
    const table = qualified(database, 'events_raw_v1');
    // Steady state: from the first poll that sees rows to the one that sees them all.
    let first: CpuSnapshot | undefined;
    let rows = 0;
    for (;;) {
      peakRss = Math.max(peakRss, (await rssOf(pid)).rss);
      const [row] = await ch.query<{ n: string }>(sql`SELECT count() AS n FROM ${table}`);
      rows = Number(row?.n ?? 0);
      if (rows > 0) first ??= await snapshot(rows);
      if (rows >= EVENTS) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const last = await snapshot(rows);
    const now = last.at;
    const elapsed = (now - t) / 1000;
    const steady = first ? (rows - first.rows) / ((now - first.at) / 1000) : NaN;
    const { hwm } = await rssOf(pid);
    const [final] = await ch.query<{ n: string }>(sql`SELECT count() AS n FROM ${table} FINAL`);
    const exited = new Promise((r) => service.once('exit', r));
    service.kill('SIGTERM');
    await exited;
    const mb = (b: number) => `${fmt(b / 1_048_576)} MB`;
    console.log(`  aggregator JetStream->ClickHouse ${fmt(steady)} events/s while draining`);
    console.log(
      `  aggregator JetStream->ClickHouse ${fmt(EVENTS / elapsed)} events/s (${fmt(EVENTS)} events in ${elapsed.toFixed(1)} s, start included; ${fmt(Number(final?.n))} rows after FINAL)`,
    );
    if (first) {
      const n = rows - first.rows;
      const per = (i: number) =>
        pids[i] === undefined ? 'n/a' : `${((last.procs[i]! - first.procs[i]!) / n).toFixed(1)} µs`;
      const busy =
        (last.machine.busy - first.machine.busy) / (last.machine.total - first.machine.total);
      console.log(
        `  CPU per event while draining aggregator ${per(0)}, ClickHouse ${per(1)}, NATS ${per(2)}; machine ${(busy * 100).toFixed(0)}% busy`,
      );
    }
    console.log(
      `  aggregator peak RSS          ${mb(Math.max(hwm, peakRss))} (VmHWM) draining ${fmt(EVENTS)} events`,
    );
    await ch.command(sql`DROP DATABASE IF EXISTS ${ident(database)}`);
  } finally {
    await jsm.streams.delete(names.eventsStream).catch(() => undefined);
    await ch.close();
    await nc.drain();
    await stop();
  }
}

await main();
