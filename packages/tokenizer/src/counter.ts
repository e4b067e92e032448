import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { countsInline, countWith, jobChars, jobCost, runJob, type CountJob } from './job.js';
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
 * An inline count that holds the loop longer than this (text that is slow to tokenize: base64,
 * random CJK, long runs without a break, 10-200x English's cost a character) sends its
 * tenant's counts to the pool for `DEMOTE_MS`, where they wait their turn in its own queue.
 */
const DEFAULT_INLINE_BUDGET_MS = 4;
const DEMOTE_MS = 60_000;

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
  /** An inline count longer than this sends its tenant's counts to the pool for a minute. */
  inlineBudgetMs?: number;
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
  private readonly inlineBudgetMs: number;
  private readonly pool: WorkerPool;
  private readonly counts = { inline: 0, pooled: 0 };
  /** Tenants whose counts go to the pool, until when (performance.now()). */
  private readonly demoted = new Map<string, number>();

  constructor(opts: TokenCounterOptions = {}) {
    this.inlineMaxChars = opts.inlineMaxChars ?? DEFAULT_INLINE_MAX_CHARS;
    this.inlineBudgetMs = opts.inlineBudgetMs ?? DEFAULT_INLINE_BUDGET_MS;
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
    if (cost <= this.inlineMaxChars && countsInline(job.tokenizer) && !this.isDemoted(owner)) {
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
    if (ended - started > this.inlineBudgetMs) this.demoted.set(tenant, ended + DEMOTE_MS);
    return tokens;
  }

  private isDemoted(owner: CountOwner): boolean {
    if (this.demoted.size === 0) return false;
    const until = this.demoted.get(owner.tenant);
    if (until === undefined) return false;
    if (until > performance.now()) return true;
    this.demoted.delete(owner.tenant);
    return false;
  }
}
