import { countChatPrompt } from './chat.js';
import { countEmbeddingInput } from './embeddings.js';
import { chatPromptChars, embeddingInputChars } from './size.js';
import { loadTokenizer, type Tokenizer, type TokenizerName } from './tokenizers.js';
import type { ChatPromptRequest, EmbeddingInput } from './types.js';

/** One counting task; plain data, so it can be posted to a worker thread. */
export type CountJob =
  | { kind: 'chat'; tokenizer: TokenizerName; request: ChatPromptRequest }
  | { kind: 'embedding'; tokenizer: TokenizerName; input: EmbeddingInput };

export async function runJob(job: CountJob): Promise<number> {
  return countWith(job, await loadTokenizer(job.tokenizer));
}

/** Counts the job with its tokenizer, already loaded (synchronous: it holds the thread). */
export function countWith(job: CountJob, tokenizer: Tokenizer): number {
  return job.kind === 'chat'
    ? countChatPrompt(job.request, tokenizer)
    : countEmbeddingInput(job.input, tokenizer);
}

export function jobChars(job: CountJob): number {
  return job.kind === 'chat' ? chatPromptChars(job.request) : embeddingInputChars(job.input);
}

/**
 * What a character costs each tokenizer to count, against o200k on English (1): measured on
 * this 2-core box with bench/count-latency.ts and bench:families. `estimate` reads bytes and
 * normalizes (10 MB of CJK in 94-166 ms, a quarter of o200k's English rate at worst); a family
 * renders a template and runs a slower BPE engine, 3-15x o200k on the same text.
 */
const COST_PER_CHAR: Record<'estimate' | 'encoding' | 'family', number> = {
  estimate: 0.25,
  encoding: 1,
  family: 8,
};

/** The job's cost in o200k characters: its share of a worker's time in the fair queue. */
export function jobCost(job: CountJob, chars: number): number {
  return chars * COST_PER_CHAR[tokenizerClass(job.tokenizer)];
}

/**
 * Whether a job's tokenizer may count on the event loop at all: the OpenAI encodings and the
 * bound. A family loads 100-350 MB in 0.4-1.5 s and counts 3-15x slower: only in workers.
 */
export function countsInline(tokenizer: TokenizerName): boolean {
  return tokenizerClass(tokenizer) !== 'family';
}

function tokenizerClass(tokenizer: TokenizerName): keyof typeof COST_PER_CHAR {
  if (tokenizer === 'estimate') return 'estimate';
  return tokenizer === 'o200k_base' || tokenizer === 'cl100k_base' ? 'encoding' : 'family';
}

/** The same job counted with the `estimate` bound (never fewer tokens than any tokenizer). */
export function boundJob(job: CountJob): CountJob {
  return { ...job, tokenizer: 'estimate' };
}

/** Messages between the pool and a count worker. */
export interface WorkerRequest {
  id: number;
  job: CountJob;
}

/**
 * A wire format between threads, not a `Result`: it crosses `postMessage` (structured clone,
 * which keeps no Error class), is flat so each count costs one small object, and is turned
 * into a resolve or a reject by the pool, so no caller ever sees it.
 */
export type WorkerReply =
  { id: number; ok: true; tokens: number } | { id: number; ok: false; message: string };

/**
 * Sent by a worker when it starts counting job `id`, its tokenizer loaded: the count's time
 * limit runs from here, so neither the worker's boot nor the tokenizer's load is charged to it.
 */
export interface WorkerCounting {
  id: number;
  counting: true;
}
