import { Pool } from 'undici';
import type { Load, LoadResult, Target } from './protocol.js';

/** Sorted ascending; nearest rank. */
function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((sorted.length * p) / 100) - 1)]!;
}

class Recorder {
  readonly latencies: number[] = [];
  readonly lags: number[] = [];
  errors = 0;
  readonly #samples = new Set<string>();

  error(err: unknown): void {
    this.errors++;
    if (this.#samples.size < 5) this.#samples.add(err instanceof Error ? err.message : String(err));
  }

  result(seconds: number): LoadResult {
    const l = Float64Array.from(this.latencies).sort();
    const lags = Float64Array.from(this.lags).sort();
    return {
      calls: l.length,
      errors: this.errors,
      errorSamples: [...this.#samples],
      seconds,
      perSecond: l.length / seconds,
      p50: percentile(l, 50),
      p90: percentile(l, 90),
      p99: percentile(l, 99),
      max: l.length > 0 ? l[l.length - 1]! : NaN,
      mean: l.reduce((a, b) => a + b, 0) / (l.length || 1),
      sendLagP99: lags.length > 0 ? percentile(lags, 99) : 0,
    };
  }
}

/** One pool per target and load shape, kept across phases (connections stay warm). */
export class Caller {
  readonly #pools = new Map<string, Pool>();

  #pool(target: Target, connections: number): Pool {
    const key = `${target.origin} ${connections}`;
    let pool = this.#pools.get(key);
    if (!pool) {
      pool = new Pool(target.origin, {
        connections,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        keepAliveMaxTimeout: 600_000,
      });
      this.#pools.set(key, pool);
    }
    return pool;
  }

  async #call(pool: Pool, t: Target): Promise<void> {
    const res = await pool.request({
      path: t.path,
      method: 'POST',
      headers: t.headers,
      body: t.body,
    });
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 160)}`);
    }
    await res.body.arrayBuffer();
  }

  async run(target: Target, load: Load, seconds: number): Promise<LoadResult> {
    return load.mode === 'closed'
      ? this.#closed(target, load.connections, seconds)
      : this.#open(target, load.rate, seconds);
  }

  async #closed(target: Target, connections: number, seconds: number): Promise<LoadResult> {
    const pool = this.#pool(target, connections);
    const rec = new Recorder();
    const start = performance.now();
    const end = start + seconds * 1_000;
    const worker = async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await this.#call(pool, target);
          rec.latencies.push(performance.now() - t);
        } catch (err) {
          rec.error(err);
        }
      }
    };
    await Promise.all(Array.from({ length: connections }, worker));
    return rec.result((performance.now() - start) / 1_000);
  }

  /**
   * `rate` calls a second on a timer (no busy loop: the client's own CPU is measured), each
   * sent when due whatever is still in flight, so a slow server cannot slow the load down.
   * Latency runs from the send; how late sends left against the schedule is reported apart.
   */
  async #open(target: Target, rate: number, seconds: number): Promise<LoadResult> {
    const pool = this.#pool(target, 512);
    const rec = new Recorder();
    const total = Math.round(rate * seconds);
    const pending: Array<Promise<void>> = [];
    const start = performance.now();
    const dueAt = (i: number) => start + (i * 1_000) / rate;
    let sent = 0;
    const send = (due: number) => {
      const t = performance.now();
      rec.lags.push(t - due);
      pending.push(
        this.#call(pool, target).then(
          () => void rec.latencies.push(performance.now() - t),
          (err: unknown) => rec.error(err),
        ),
      );
    };
    await new Promise<void>((resolve) => {
      const tick = () => {
        const now = performance.now();
        for (; sent < total && dueAt(sent) <= now; sent++) send(dueAt(sent));
        if (sent >= total) resolve();
        else setTimeout(tick, Math.max(0, dueAt(sent) - performance.now()));
      };
      tick();
    });
    await Promise.all(pending);
    return rec.result((performance.now() - start) / 1_000);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
  }
}
