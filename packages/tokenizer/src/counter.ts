import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { countsInline, countWith, jobChars, jobCost, runJob, type CountJob } from './job.js';
import { InlineGuard, type InlineGuardOptions } from './inline-guard.js';
import { WorkerPool, type CountObserver, type OwnerCounts } from './pool.js';
import { loadedTokenizer, type Tokenizer, type TokenizerName } from './tokenizers.js';
import type { ChatPromptRequest, EmbeddingInput } from './types.js';

/**
 * Prompts that cost more than this many o200k characters (about 2,000 tokens) are counted in a
 * worker thread. Measured with bench/count-latency.ts on this 2-core box: o200k counts about
 * 2-3.5M tokens/s, so 8,000 characters hold the loop for about 1 ms inline, while a worker
 * round trip adds 0.1-1 ms; a 100k-token prompt holds the loop 40-90 ms inline and under 4 ms
 * via the pool.
 */
const DEFAULT_INLINE_MAX_CHARS = 8_000;

/**
 * Inline counts over 4 ms are charged their time past it to their tenant: 150 ms at once, 5 ms
 * a second sustained (0.5% of the loop), then its counts go to the pool for a minute
 * (inline-guard.ts). A fresh process's first thousands of counts (the JIT, the merge cache
 * filling) ran 2-30 counts of 1,500 characters over 4 ms here, up to 61 ms past it in all.
 */
const INLINE_GUARD: InlineGuardOptions = {
  budgetMs: 4,
  burstMs: 150,
  refillMsPerSecond: 5,
  demoteMs: 60_000,
};

/** Whose count it is: its queue in the pool, and the caller's abort. */
export interface CountOwner {
  tenant: string;
  /** A caller that left: its count, if still waiting in the pool, is dropped. */
  signal?: AbortSignal | undefined;
}

/** Counts with no tenant named share one queue. */
const NO_TENANT: CountOwner = { tenant: '' };

export interface TokenCounterOptions {
  /** Larger prompts (in o200k characters, job.ts) go to the worker pool. 0 sends every count. */
  inlineMaxChars?: number;
  /** Worker threads, started on first use. Default: cores - 1, between 1 and 4. */
  poolSize?: number;
  /** A count running longer in a worker is counted with the `estimate` bound. Default 10 s. */
  timeoutMs?: number;
  /** Characters one tenant may have waiting or being counted in the pool. Default 32 Mi. */
  maxQueuedChars?: number;
  /** When a tenant's slow inline counts send its counts to the pool (tests change it). */
  inlineGuard?: Partial<InlineGuardOptions>;
  observer?: CountObserver;
  /** Starts a count worker (tests pass their own). */
  spawnWorker?: () => Worker;
}

/**
 * Counts prompts without holding the event loop and without one tenant's counting delaying
 * another's: small prompts with a fast tokenizer inline; the rest in a pool of worker threads
 * (pool.ts) that serves each tenant's queue in turn, bounds what a tenant may queue, and
 * answers a count that runs too long with the `estimate` bound.
 */
export class TokenCounter {
  private readonly inlineMaxChars: number;
  private readonly guard: InlineGuard;
  private readonly pool: WorkerPool;
  private readonly counts = { inline: 0, pooled: 0 };

  constructor(opts: TokenCounterOptions = {}) {
    this.inlineMaxChars = opts.inlineMaxChars ?? DEFAULT_INLINE_MAX_CHARS;
    this.guard = new InlineGuard({ ...INLINE_GUARD, ...opts.inlineGuard });
    this.pool = new WorkerPool({
      size: opts.poolSize ?? Math.min(4, Math.max(1, availableParallelism() - 1)),
      timeoutMs: opts.timeoutMs ?? 10_000,
      maxPendingChars: opts.maxQueuedChars ?? 32 * 1024 * 1024,
      observer: opts.observer,
      spawn: opts.spawnWorker,
    });
  }

  countChat(
    request: ChatPromptRequest,
    tokenizer: TokenizerName,
    owner?: CountOwner,
  ): Promise<number> {
    return this.count({ kind: 'chat', tokenizer, request }, owner);
  }

  countEmbedding(
    input: EmbeddingInput,
    tokenizer: TokenizerName,
    owner?: CountOwner,
  ): Promise<number> {
    return this.count({ kind: 'embedding', tokenizer, input }, owner);
  }

  /**
   * The job's prompt tokens. Rejects with `CountQueueFull` when the tenant already has its
   * bound of characters in the pool, and with the signal's reason when its caller left while
   * it waited there.
   */
  count(job: CountJob, owner: CountOwner = NO_TENANT): Promise<number> {
    const chars = jobChars(job);
    const cost = jobCost(job, chars);
    if (
      cost <= this.inlineMaxChars &&
      countsInline(job.tokenizer) &&
      this.guard.allows(owner.tenant)
    ) {
      this.counts.inline += 1;
      const tokenizer = loadedTokenizer(job.tokenizer);
      // Not loaded yet in this thread: load it (once), then count.
      if (!tokenizer) return runJob(job);
      // A throw in the executor is the promise's rejection.
      return new Promise((resolve) => resolve(this.timed(job, tokenizer, owner.tenant)));
    }
    this.counts.pooled += 1;
    return this.pool.run({ job, owner: owner.tenant, chars, cost, signal: owner.signal });
  }

  /** Loads these encodings here (those that count inline) and in every worker. */
  async warmUp(tokenizers: readonly TokenizerName[]): Promise<void> {
    for (const tokenizer of tokenizers) {
      const job: CountJob = { kind: 'embedding', tokenizer, input: 'warm up' };
      await Promise.all([countsInline(tokenizer) && runJob(job), this.pool.warm(job)]);
    }
  }

  /** How many counts ran inline and in the pool, and how many workers are up. */
  stats(): { inline: number; pooled: number; workers: number } {
    return { ...this.counts, workers: this.pool.workers };
  }

  /** Each tenant's counts waiting or running in the pool. */
  queues(): ReadonlyMap<string, Readonly<OwnerCounts>> {
    return this.pool.owners();
  }

  /** Stops the workers; counts still waiting or running in the pool reject. */
  close(): Promise<void> {
    return this.pool.close();
  }

  private timed(job: CountJob, tokenizer: Tokenizer, tenant: string): number {
    const started = performance.now();
    const tokens = countWith(job, tokenizer);
    const ended = performance.now();
    this.guard.counted(tenant, ended - started, ended);
    return tokens;
  }
}
