import type { LiveCall } from '../calls.js';
import type { ChatChunk } from '../stream/accumulator.js';
import { classify, type Failure, type Opened } from '../upstream/client.js';
import { SseParser } from '../upstream/sse.js';

/** How reading an upstream response ended: it ran to its end, or it failed / was aborted. */
export type PumpEnd = { ok: true; sawDone: boolean } | { ok: false; failure: Failure };

/**
 * Feeds every SSE `data` payload of an upstream response to `onData`, in order, waiting for
 * each (so a slow client slows the upstream read). An upstream that answered plain JSON
 * instead of a stream is turned into one chunk. Errors (dropped socket, timeouts, the edge's
 * own aborts, a failed write to the client) end it as a classified failure, never a throw.
 */
export async function pump(
  opened: Opened,
  live: LiveCall,
  onData: (data: string) => Promise<void> | void,
): Promise<PumpEnd> {
  let sawDone = false;
  const deliver = async (data: string) => {
    if (data === '[DONE]') sawDone = true;
    else await onData(data);
  };
  try {
    const type = String(opened.headers['content-type'] ?? '');
    if (!type.includes('text/event-stream')) {
      await deliver(JSON.stringify(completionAsChunk(await opened.body.json())));
      return { ok: true, sawDone: true };
    }
    const parser = new SseParser();
    for await (const bytes of opened.body as AsyncIterable<Buffer>) {
      for (const data of parser.push(bytes)) await deliver(data);
    }
    return { ok: true, sawDone };
  } catch (err) {
    return { ok: false, failure: classify(err, live.signal, opened.signal) };
  }
}

/** A chunk as JSON, or undefined when the upstream sent something else. */
export function parseChunk(data: string): ChatChunk | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return typeof value === 'object' && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A whole `chat.completion` as the single chunk a stream of it would add up to. */
function completionAsChunk(body: unknown): ChatChunk {
  const c = (body ?? {}) as Omit<ChatChunk, 'choices'> & {
    choices?: { index?: number; message?: Record<string, unknown>; finish_reason?: string }[];
  };
  return {
    ...c,
    object: 'chat.completion.chunk',
    choices: (c.choices ?? []).map((choice) => {
      const message = choice.message ?? {};
      const toolCalls = Array.isArray(message.tool_calls)
        ? (message.tool_calls as object[]).map((t, index) => ({ ...t, index }))
        : undefined;
      return {
        index: choice.index,
        delta: { ...message, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
        finish_reason: choice.finish_reason ?? null,
      };
    }),
  };
}
