/** Load generators for benchmarks: closed loop at a concurrency, open loop at a fixed rate. */

export interface LoadResult {
  ops: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  errors: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

function summarise(latencies: number[], seconds: number, errors: number): LoadResult {
  latencies.sort((a, b) => a - b);
  return {
    ops: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
  };
}

/** `concurrency` callers, each issuing `op` back to back for `ms`. */
export async function closedLoop(
  op: () => Promise<unknown>,
  concurrency: number,
  ms: number,
): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await op();
          latencies.push(performance.now() - t);
        } catch {
          errors++;
        }
      }
    }),
  );
  return summarise(latencies, (performance.now() - start) / 1_000, errors);
}

/**
 * `rate` operations a second for `ms`, each timed from when it was due (not when it was sent),
 * so a stall shows up in the latency instead of hiding (no coordinated omission).
 */
export async function openLoop(
  op: () => Promise<unknown>,
  rate: number,
  ms: number,
): Promise<LoadResult> {
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  let errors = 0;
  const start = performance.now();
  const total = Math.round((rate * ms) / 1_000);
  let sent = 0;
  while (sent < total) {
    const now = performance.now();
    const due = Math.min(total, Math.floor(((now - start) * rate) / 1_000) + 1);
    for (; sent < due; sent++) {
      const dueAt = start + (sent * 1_000) / rate;
      pending.push(
        op().then(
          () => void latencies.push(performance.now() - dueAt),
          () => void errors++,
        ),
      );
    }
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(pending);
  return summarise(latencies, (performance.now() - start) / 1_000, errors);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Each scenario's median of a field over its rounds: `m('edge @32', 'p99')`. */
export function medians(results: Record<string, LoadResult[]>) {
  return (key: string, field: keyof LoadResult): number =>
    median(results[key]!.map((r) => r[field]));
}

/**
 * The table the load benches print, a scenario a row in the order they ran: the medians of
 * its rounds' throughput, p50 and p99 (ms) and errors. `nameWidth` sizes the scenario column;
 * `rateLabel` and `rateWidth` name and size the throughput column (ops/s in 10).
 */
export function medianTable(
  results: Record<string, LoadResult[]>,
  opts: { nameWidth: number; rateLabel?: string; rateWidth?: number },
): string {
  const { nameWidth, rateLabel = 'ops/s', rateWidth = 10 } = opts;
  const m = medians(results);
  const header =
    'scenario'.padEnd(nameWidth) +
    rateLabel.padStart(rateWidth) +
    'p50 ms'.padStart(10) +
    'p99 ms'.padStart(10) +
    'errors'.padStart(8);
  const rows = Object.keys(results).map(
    (key) =>
      key.padEnd(nameWidth) +
      m(key, 'perSecond').toFixed(0).padStart(rateWidth) +
      m(key, 'p50').toFixed(3).padStart(10) +
      m(key, 'p99').toFixed(3).padStart(10) +
      String(m(key, 'errors')).padStart(8),
  );
  return [header, ...rows].join('\n');
}
