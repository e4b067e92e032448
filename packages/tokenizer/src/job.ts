import { countChatPrompt } from './chat.js';
import { countEmbeddingInput } from './embeddings.js';
import { chatPromptChars, embeddingInputChars } from './size.js';
import { loadTokenizer, type TokenizerName } from './tokenizers.js';
import type { ChatPromptRequest, EmbeddingInput } from './types.js';

/** One counting task; plain data, so it can be posted to a worker thread. */
export type CountJob =
  | { kind: 'chat'; tokenizer: TokenizerName; request: ChatPromptRequest }
  | { kind: 'embedding'; tokenizer: TokenizerName; input: EmbeddingInput };

export async function runJob(job: CountJob): Promise<number> {
  const tokenizer = await loadTokenizer(job.tokenizer);
  return job.kind === 'chat'
    ? countChatPrompt(job.request, tokenizer)
    : countEmbeddingInput(job.input, tokenizer);
}

export function jobChars(job: CountJob): number {
  return job.kind === 'chat' ? chatPromptChars(job.request) : embeddingInputChars(job.input);
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
