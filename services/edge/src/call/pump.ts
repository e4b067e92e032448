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
 * arrive (event-driven: a reply of a thousand chunks costs no promise per chunk). The upstream
 * is read at its own pace whatever the client does: what the client has not taken yet waits on
 * the edge (`unread`), and once `keepsUnread` will not keep that much the client is too slow
 * and `onLag` is called (once; the caller ends the call). Reading never pauses for the client: the
 * provider bills every token it writes, and one written into the connection but left unread
 * when the call ends is billed by the provider and not by Holdfast, so a client that stopped
 * reading would choose how much of its reply goes unbilled (hostile.slow-reader.e2e). An
 * upstream that answered plain JSON instead of a stream is handed over as one payload
 * (`asJson` turns it into the surface's stream shape). Errors (dropped socket, timeouts, the
 * edge's own aborts, a throwing `onData`) end it as a classified failure.
 */
export async function pump(
  opened: Opened,
  live: LiveCall,
  onData: OnData,
  opts: {
    /**
     * Bytes written for the client that it has not taken yet: all that waits on the edge, in
     * the client's stream and in its socket's own buffer.
     */
    unread?: () => number;
    /**
     * Called once the payloads at hand are handed over (after each read, and after a held
     * payload is let through): where the events written meanwhile leave in one write
     * (`WriteBatch`).
     */
    flush?: () => void;
    asJson?: (body: unknown) => SseEvent[];
    /**
     * Whether the edge may keep this many `unread` bytes (asked at the end of each turn of the
     * event loop that read the upstream); once it may not, `onLag`.
     */
    keepsUnread?: (bytes: number) => boolean;
    onLag?: () => void;
    /**
     * A payload the edge read but never handed to `onData`: the call was aborted while it
     * waited behind a held one (a hold extension, a count) or behind the payload that ended the
     * call, in the same read. The provider wrote it, and bills it, before it saw the hangup.
     */
    onUnsent?: (event: SseEvent) => void;
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
      for (const [i, event] of events.entries()) {
        if (live.signal.aborted) {
          for (const unsent of events.slice(i)) opts.onUnsent?.(unsent);
          break;
        }
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
  // What was read and will not be handed over (the call was aborted): counted, not passed on.
  const unsent = (): void => {
    for (const event of queue) opts.onUnsent?.(event);
    queue.length = 0;
  };
  // What the body took from the socket and still buffers (read while it was paused), parsed
  // into the queue; a line the upstream had not finished is left out.
  const unparsed = (): void => {
    body.removeAllListeners('data');
    try {
      for (
        let bytes = body.read() as Buffer | null;
        bytes !== null;
        bytes = body.read() as Buffer | null
      ) {
        for (const event of parser.push(bytes)) if (event.data !== '[DONE]') queue.push(event);
      }
    } catch {
      // What could not be parsed is not counted (as if it had come after the hangup).
    }
  };
  return new Promise<PumpEnd>((resolve) => {
    let done = false;
    const finish = (end: PumpEnd) => {
      if (!done) {
        done = true;
        // An aborted read ends (its socket destroyed) before a held payload's wait settles:
        // what queued behind it is counted now, before the caller settles, and so is what the
        // body took from the socket while it was paused for that wait, still unparsed.
        if (!end.ok) {
          unparsed();
          unsent();
        }
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
          unsent();
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
                else body.resume();
              }
            },
            (err: unknown) => fail(err),
          );
          return;
        }
      }
    };
    const { unread, keepsUnread, onLag } = opts;
    let lagged = false;
    let looking = false;
    // The client's lag is looked at once the turn's writes have gone as far as they can (a
    // turn can read megabytes of a fast upstream, and node hands them to the socket on later
    // ticks of it): what is only waiting for the turn to end is not lag, and everything the
    // client has not taken is, wherever on the edge it waits.
    const lookAtLag = (): void => {
      looking = false;
      if (done || lagged || !unread || !keepsUnread || keepsUnread(unread())) return;
      lagged = true;
      onLag?.();
    };
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
      if (!looking && !lagged && unread) {
        looking = true;
        setImmediate(lookAtLag);
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
