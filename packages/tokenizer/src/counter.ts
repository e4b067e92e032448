import { availableParallelism } from 'node:os';
import { jobChars, runJob, type CountJob } from './job.js';
import { WorkerPool } from './pool.js';
import type { TokenizerName } from './tokenizers.js';
import type { ChatPromptRequest, EmbeddingInput } from './types.js';

/**
 * Prompts above this many characters (about 2,000 tokens) are counted in a worker thread.
 * Measured with bench/count-latency.ts on this 2-core box: o200k counts about 2-3.5M tokens/s,
 * so 8,000 characters hold the loop for about 1 ms inline, while a worker round trip adds
 * 0.1-1 ms; a 100k-token prompt holds the loop 40-90 ms inline and under 4 ms via the pool.
 */
const DEFAULT_INLINE_MAX_CHARS = 8_000;

export interface TokenCounterOptions {
  /** Larger prompts go to the worker pool. 0 sends every BPE count to the pool. */
  inlineMaxChars?: number;
  /** Worker threads, started on first use. Default: cores - 1, between 1 and 4. */
  poolSize?: number;
}

/**
 * Counts prompts without holding the event loop: small prompts inline, long ones in a pool of
 * worker threads, each loading an encoding once on first use. `estimate` never needs a worker.
 */
export class TokenCounter {
  private readonly inlineMaxChars: number;
  private readonly pool: WorkerPool;
  private readonly counts = { inline: 0, pooled: 0 };

  constructor(opts: TokenCounterOptions = {}) {
    this.inlineMaxChars = opts.inlineMaxChars ?? DEFAULT_INLINE_MAX_CHARS;
    this.pool = new WorkerPool(
      opts.poolSize ?? Math.min(4, Math.max(1, availableParallelism() - 1)),
    );
  }

  countChat(request: ChatPromptRequest, tokenizer: TokenizerName): Promise<number> {
    return this.count({ kind: 'chat', tokenizer, request });
  }

  countEmbedding(input: EmbeddingInput, tokenizer: TokenizerName): Promise<number> {
    return this.count({ kind: 'embedding', tokenizer, input });
  }

  count(job: CountJob): Promise<number> {
    if (job.tokenizer === 'estimate' || jobChars(job) <= this.inlineMaxChars) {
      this.counts.inline += 1;
      return runJob(job);
    }
    this.counts.pooled += 1;
    return this.pool.run(job);
  }

  /** Loads these encodings here and in every worker, so the first requests pay no load. */
  async warmUp(tokenizers: readonly TokenizerName[]): Promise<void> {
    for (const tokenizer of tokenizers) {
      const job: CountJob = { kind: 'embedding', tokenizer, input: 'warm up' };
      await Promise.all([runJob(job), this.pool.warm(job)]);
    }
  }

  /** How many counts ran inline and in the pool, and how many workers are up. */
  stats(): { inline: number; pooled: number; workers: number } {
    return { ...this.counts, workers: this.pool.workers };
  }

  /** Stops the workers; counts still in flight in the pool reject. */
  close(): Promise<void> {
    return this.pool.close();
  }
}
