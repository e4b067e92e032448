import type { Writable } from 'node:stream';
import { Err, Ok, type Result } from '@holdfast/runtime';
import type { LiveCall } from './in-flight.js';
import { classify, type Failure, type Opened } from '../upstream/client.js';
import { SseParser, type SseEvent } from '../upstream/sse.js';

/**
 * How reading an upstream response ended: it ran to its end, or it failed / was aborted (the
 * failure's `kind` is its code). Built once per response, never per chunk.
 */
export type PumpEnd = Result<{ sawDone: boolean }, Failure>;

/**
 * A handler of one SSE `data` payload. It returns nothing to go on at once, or a promise to
 * hold the stream until it settles (a hold extension, the upstream's count before a cut):
 * reading pauses and later payloads wait, in order.
 */
export type OnData = (event: SseEvent) => void | Promise<void>;

/**
 * Feeds every SSE `data` payload of an upstream response to `onData`, in order, as the bytes
 * arrive (event-driven: a reply of a thousand chunks costs no promise per chunk). When `out`
 * (the client's stream) is full, reading the upstream pauses until it drains, so a slow client
 * slows the upstream. An upstream that answered plain JSON instead of a stream is handed over
 * as one payload (`asJson` turns it into the surface's stream shape). Errors (dropped socket,
 * timeouts, the edge's own aborts, a throwing `onData`) end it as a classified failure.
 */
export async function pump(
  opened: Opened,
  live: LiveCall,
  onData: OnData,
  opts: {
    out?: Writable;
    /**
     * Called once the payloads at hand are handed over (after each read, and after a held
     * payload is let through), before `out`'s backpressure is looked at: where the events
     * written meanwhile leave in one write (`SseBatch`).
     */
    flush?: () => void;
    asJson?: (body: unknown) => SseEvent[];
  } = {},
): Promise<PumpEnd> {
  const failed = (err: unknown): PumpEnd => Err(classify(err, live.signal, opened.signal));
  const type = String(opened.headers['content-type'] ?? '');
  if (!type.includes('text/event-stream')) {
    try {
      const json: unknown = await opened.body.json();
      const events = opts.asJson
        ? opts.asJson(json)
        : [{ event: undefined, data: JSON.stringify(json) }];
      for (const event of events) {
        if (live.signal.aborted) break;
        await onData(event);
      }
      return live.signal.aborted ? failed(live.signal.reason) : Ok({ sawDone: true });
    } catch (err) {
      return failed(err);
    }
  }
  const { body } = opened;
  const parser = new SseParser();
  let sawDone = false;
  const queue: SseEvent[] = [];
  let waiting = false;
  let ended = false;
  return new Promise<PumpEnd>((resolve) => {
    let done = false;
    const finish = (end: PumpEnd) => {
      if (!done) {
        done = true;
        resolve(end);
      }
    };
    const fail = (err: unknown) => {
      body.destroy(err as Error);
      finish(failed(err));
    };
    // Hands queued payloads over until one asks to wait (or the call is aborted).
    const drain = (): void => {
      while (!waiting && queue.length > 0) {
        if (live.signal.aborted) {
          queue.length = 0;
          break;
        }
        const event = queue.shift()!;
        let gate: void | Promise<void>;
        try {
          gate = onData(event);
        } catch (err) {
          return fail(err);
        }
        if (gate) {
          waiting = true;
          body.pause();
          // What was let through before the held payload goes now, not after its wait.
          opts.flush?.();
          gate.then(
            () => {
              waiting = false;
              drain();
              opts.flush?.();
              if (!waiting) {
                if (ended) finish(Ok({ sawDone }));
                else if (!out?.writableNeedDrain) body.resume();
              }
            },
            (err: unknown) => fail(err),
          );
          return;
        }
      }
    };
    const out = opts.out;
    const onBytes = (bytes: Buffer) => {
      try {
        for (const event of parser.push(bytes)) {
          if (event.data === '[DONE]') sawDone = true;
          else queue.push(event);
        }
      } catch (err) {
        return fail(err);
      }
      drain();
      opts.flush?.();
      if (!waiting && out?.writableNeedDrain) {
        body.pause();
        out.once('drain', () => {
          if (!waiting) body.resume();
        });
      }
    };
    body.on('data', onBytes);
    body.once('end', () => {
      ended = true;
      if (!waiting) finish(Ok({ sawDone }));
    });
    body.once('error', (err) => finish(failed(err)));
  });
}

/** A payload as a JSON object, or undefined when the upstream sent something else. */
export function parseObject(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
