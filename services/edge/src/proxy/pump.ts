import type { Writable } from 'node:stream';
import type { LiveCall } from '../calls.js';
import type { ChatChunk } from '../stream/accumulator.js';
import { classify, type Failure, type Opened } from '../upstream/client.js';
import { SseParser } from '../upstream/sse.js';

/** How reading an upstream response ended: it ran to its end, or it failed / was aborted. */
export type PumpEnd = { ok: true; sawDone: boolean } | { ok: false; failure: Failure };

/**
 * Feeds every SSE `data` payload of an upstream response to `onData`, in order, as the bytes
 * arrive (event-driven: a reply of a thousand chunks costs no promise per chunk). When `out`
 * (the client's stream) is full, reading the upstream pauses until it drains, so a slow
 * client slows the upstream. An upstream that answered plain JSON instead of a stream is
 * turned into one chunk. Errors (dropped socket, timeouts, the edge's own aborts, a throwing
 * `onData`) end it as a classified failure, never a throw.
 */
export async function pump(
  opened: Opened,
  live: LiveCall,
  onData: (data: string) => void,
  out?: Writable,
): Promise<PumpEnd> {
  const failed = (err: unknown): PumpEnd => ({
    ok: false,
    failure: classify(err, live.signal, opened.signal),
  });
  const type = String(opened.headers['content-type'] ?? '');
  if (!type.includes('text/event-stream')) {
    try {
      onData(JSON.stringify(completionAsChunk(await opened.body.json())));
      return { ok: true, sawDone: true };
    } catch (err) {
      return failed(err);
    }
  }
  const { body } = opened;
  const parser = new SseParser();
  let sawDone = false;
  return new Promise<PumpEnd>((resolve) => {
    const onBytes = (bytes: Buffer) => {
      try {
        for (const data of parser.push(bytes)) {
          if (live.signal.aborted) break;
          if (data === '[DONE]') sawDone = true;
          else onData(data);
        }
      } catch (err) {
        body.destroy(err as Error);
        return;
      }
      if (out?.writableNeedDrain) {
        body.pause();
        out.once('drain', () => body.resume());
      }
    };
    body.on('data', onBytes);
    body.once('end', () => resolve({ ok: true, sawDone }));
    body.once('error', (err) => resolve(failed(err)));
  });
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
