import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { TokenCounter } from './counter.js';
import { estimateChatPrompt } from './estimate.js';
import type { CountJob } from './job.js';
import { CountQueueFull, WorkerPool, type PoolJob, type WorkerPoolOptions } from './pool.js';
import type { ChatPromptRequest } from './types.js';

/** About `chars` characters of English, different for each `seed`. */
function text(chars: number, seed: number): string {
  const sentence = `Tenant ${seed} reserves the worst case of each call before it reaches the model. `;
  return sentence.repeat(Math.ceil(chars / sentence.length)).slice(0, chars);
}

const chat = (content: string): ChatPromptRequest => ({
  model: 'gpt-4o',
  messages: [{ role: 'user', content }],
});

let counter: TokenCounter | undefined;
let pool: WorkerPool | undefined;
afterEach(async () => {
  await counter?.close();
  await pool?.close();
  counter = undefined;
  pool = undefined;
});

describe('TokenCounter pool: fairness between tenants', () => {
  it("counts a tenant's prompt right after the count already running, not behind another tenant's backlog", async () => {
    counter = new TokenCounter({ poolSize: 1 });
    await counter.warmUp(['o200k_base']);
    const done: string[] = [];
    const count = (name: string, chars: number, tenant: string) =>
      counter!
        .countChat(chat(text(chars, done.length + name.length)), 'o200k_base', { tenant })
        .then(() => done.push(name));
    // Eleven counts queued at once: the queue decides the order, not how long each takes.
    const a = Array.from({ length: 10 }, (_, i) => count(`a${i + 1}`, 200_000, 'a'));
    const b = count('b1', 20_000, 'b');
    await Promise.all([...a, b]);
    expect(done.indexOf('b1')).toBe(1);
    expect(done.filter((n) => n !== 'b1')).toEqual(a.map((_, i) => `a${i + 1}`));
  }, 60_000);

  it('answers a count that runs past the time limit with the estimate bound, on a new worker', async () => {
    const timedOut: string[] = [];
    counter = new TokenCounter({
      poolSize: 1,
      timeoutMs: 1_500,
      observer: { timedOut: (owner) => timedOut.push(owner) },
    });
    await counter.warmUp(['o200k_base']);
    // One pre-tokenizer piece of 300,000 letters: BPE merges it in quadratic time (hours).
    const stuck = chat('a'.repeat(300_000));
    const next = chat(text(20_000, 1));
    const [tokens, after] = await Promise.all([
      counter.countChat(stuck, 'o200k_base', { tenant: 'a' }),
      counter.countChat(next, 'o200k_base', { tenant: 'b' }),
    ]);
    expect(tokens).toBe(estimateChatPrompt(stuck));
    expect(after).toBeGreaterThan(4_000);
    expect(timedOut).toEqual(['a']);
    expect(counter.stats().workers).toBe(1);
  }, 60_000);
});

/**
 * A stand-in count worker: listens after `bootMs`, then starts counting and answers an
 * embedding input's length after `delayMs`; `crash` exits the thread.
 */
function fakeWorker(delayMs: number, bootMs = 0): Worker {
  const code = `
    const { parentPort } = require('node:worker_threads');
    setTimeout(() => {
      parentPort.on('message', ({ id, job }) => {
        if (job.input === 'crash') process.exit(7);
        parentPort.postMessage({ id, counting: true });
        setTimeout(() => parentPort.postMessage({ id, ok: true, tokens: job.input.length }), ${delayMs});
      });
    }, ${bootMs});`;
  return new Worker(code, { eval: true });
}

/** A pool of fake workers (answering after `delayMs`) with the options given. */
function fakePool(delayMs: number, opts: Partial<WorkerPoolOptions> = {}, bootMs = 0): WorkerPool {
  return new WorkerPool({
    size: 1,
    timeoutMs: 10_000,
    maxPendingChars: 1_000,
    spawn: () => fakeWorker(delayMs, bootMs),
    ...opts,
  });
}

function job(owner: string, input: string, signal?: AbortSignal): PoolJob {
  const count: CountJob = { kind: 'embedding', tokenizer: 'o200k_base', input };
  return { job: count, owner, chars: input.length, cost: input.length, signal };
}

describe('WorkerPool', () => {
  it('fails only the count of a worker that crashed; the counts waiting run on its successor', async () => {
    pool = fakePool(5);
    const crashed = pool.run(job('a', 'crash'));
    const after = [pool.run(job('a', 'aaa')), pool.run(job('b', 'bb'))];
    await expect(crashed).rejects.toThrow(/exited with code 7/);
    expect(await Promise.all(after)).toEqual([3, 2]);
    expect(pool.workers).toBe(1);
    expect(pool.owners().size).toBe(0);
  });

  it("runs a count's time limit while it counts, not while its worker boots", async () => {
    const timedOut: string[] = [];
    // A worker that boots for 4x the limit (a new one on a loaded box), then answers at once:
    // the limit is far from both, so a loaded box moves neither across it.
    const observer = { timedOut: (o: string) => timedOut.push(o) };
    pool = fakePool(0, { timeoutMs: 1_000, observer }, 4_000);
    expect(await pool.run(job('a', 'aaa'))).toBe(3);
    expect(timedOut).toEqual([]);
  });

  it('stops a worker that never starts its count (stuck at boot), as a count past its limit', async () => {
    const timedOut: string[] = [];
    const observer = { timedOut: (o: string) => timedOut.push(o) };
    // Every worker boots for a minute; the start limit is 200 ms: the count is taken back and
    // tried once more with its bound on a new worker, which is stuck too, so it fails.
    pool = fakePool(0, { timeoutMs: 1_000, startTimeoutMs: 200, observer }, 60_000);
    await expect(pool.run(job('a', 'aaa'))).rejects.toThrow(/did not start it/);
    expect(timedOut).toEqual(['a']);
  });

  it("bounds the characters a tenant may have waiting or running, not another's", async () => {
    pool = fakePool(20, { maxPendingChars: 100 });
    const taken = [pool.run(job('a', 'x'.repeat(60))), pool.run(job('a', 'x'.repeat(40)))];
    const refused = await pool.run(job('a', 'x')).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CountQueueFull);
    expect(refused).toMatchObject({ owner: 'a', pendingChars: 100, chars: 1, limit: 100 });
    expect(pool.owners().get('a')).toEqual({ waiting: 1, running: 1, chars: 100 });
    // One count larger than the bound is taken when the tenant has none in the pool.
    const b = pool.run(job('b', 'y'.repeat(500)));
    expect(await Promise.all([...taken, b])).toEqual([60, 40, 500]);
    expect(await pool.run(job('a', 'x'.repeat(100)))).toBe(100);
  });

  it('drops a waiting count whose caller left, with the reason it gave', async () => {
    pool = fakePool(20);
    const running = pool.run(job('a', 'aaaa'));
    const caller = new AbortController();
    const waiting = pool.run(job('b', 'bbbb', caller.signal));
    caller.abort(new Error('client left'));
    await expect(waiting).rejects.toThrow('client left');
    expect(pool.owners().has('b')).toBe(false);
    expect(await running).toBe(4);
  });

  it('runs a tenant on all workers but one while another tenant may come', async () => {
    const started: string[] = [];
    pool = fakePool(30, { size: 3, observer: { started: (owner) => started.push(owner) } });
    const a = ['a1', 'a2', 'a3', 'a4'].map((input) => pool!.run(job('a', input)));
    expect(pool.owners().get('a')).toMatchObject({ running: 2, waiting: 2 });
    const b = pool.run(job('b', 'b1'));
    expect(started).toEqual(['a', 'a', 'b']);
    await Promise.all([...a, b]);
    expect(started).toHaveLength(5);
  });
});
