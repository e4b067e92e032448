import {
  BatchReply,
  MAX_BATCH_ITEMS,
  type BatchedOperation,
  type NatsNames,
} from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import type { z } from 'zod';
import { Err, type Result } from './errors.js';
import { authoritySubject, codedError, parseReply, request, RpcError } from './rpc.js';

interface Pending {
  op: BatchedOperation;
  body: unknown;
  schema: z.ZodType;
  timeoutMs: number;
  resolve: (reply: Result<unknown, RpcError>) => void;
}

/** After a batch found no responder (an authority without `batch`), requests go alone this long. */
const ALONE_FOR_MS = 10_000;

/**
 * Coalesces the call path's requests (admit, settle, release, extend, renew) made in one turn of
 * the event loop into one `batch` request. Under load an edge asks for many at the same moment,
 * and every message costs each process it crosses a wake-up: one message instead of n saves
 * the edge, the NATS server and the authority most of that. Nothing waits for company: the
 * batch leaves at the end of the turn (setImmediate, after the I/O callbacks that asked), and
 * a request that is alone in its turn goes as itself, so at low rates nothing changes.
 *
 * Each item is answered as if it had come alone: its own reply schema, its own error code, its
 * own timeout (a batch waits for its longest; an item that may wait less times out alone).
 */
export class RequestBatcher {
  #queue: Pending[] = [];
  #aloneUntil = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly names: NatsNames,
  ) {}

  request<S extends z.ZodType>(
    op: BatchedOperation,
    body: unknown,
    schema: S,
    timeoutMs: number,
  ): Promise<Result<z.output<S>, RpcError>> {
    return new Promise<Result<unknown, RpcError>>((resolve) => {
      if (this.#queue.length === 0) setImmediate(() => this.#flush());
      this.#queue.push({ op, body, schema, timeoutMs, resolve });
    }) as Promise<Result<z.output<S>, RpcError>>;
  }

  #flush(): void {
    const queue = this.#queue;
    this.#queue = [];
    for (let i = 0; i < queue.length; i += MAX_BATCH_ITEMS) {
      void this.#send(queue.slice(i, i + MAX_BATCH_ITEMS));
    }
  }

  #alone(p: Pending): Promise<void> {
    const subject = authoritySubject(this.names, p.op);
    return request(this.nc, subject, p.body, p.schema, p.timeoutMs).then(p.resolve);
  }

  async #send(items: Pending[]): Promise<void> {
    if (items.length === 1 || Date.now() < this.#aloneUntil) {
      await Promise.all(items.map((p) => this.#alone(p)));
      return;
    }
    const timeoutMs = Math.max(...items.map((p) => p.timeoutMs));
    const answers = items.map((p) => once(p, timeoutMs, this.names));
    const reply = await request(
      this.nc,
      authoritySubject(this.names, 'batch'),
      { items: items.map(({ op, body }) => ({ op, body })) },
      BatchReply,
      timeoutMs,
    );
    if (!reply.ok && reply.error.code === 'no_responders') {
      this.#aloneUntil = Date.now() + ALONE_FOR_MS;
      await Promise.all(items.map((p, i) => this.#alone({ ...p, resolve: answers[i]! })));
      return;
    }
    if (!reply.ok) {
      for (const answer of answers) answer(Err(reply.error));
      return;
    }
    const got = reply.value.items;
    items.forEach((p, i) => {
      const a = got[i];
      const subject = authoritySubject(this.names, p.op);
      if (!a) {
        answers[i]!(
          Err(new RpcError({ code: 'internal', message: `malformed reply on ${subject}` })),
        );
      } else if (!a.ok) answers[i]!(Err(codedError(a.code, a.message)));
      else answers[i]!(parseReply(p.schema, a.value, subject));
    });
  }
}

/**
 * The item's resolve, called once: by its answer, or by its own timeout when it may wait less
 * than the batch it travels in.
 */
function once(
  p: Pending,
  batchTimeoutMs: number,
  names: NatsNames,
): (reply: Result<unknown, RpcError>) => void {
  if (p.timeoutMs >= batchTimeoutMs) return p.resolve;
  let done = false;
  const timer = setTimeout(() => {
    const subject = authoritySubject(names, p.op);
    finish(
      Err(
        new RpcError({
          code: 'timeout',
          message: `no reply on ${subject} within ${p.timeoutMs} ms`,
          retry: true,
        }),
      ),
    );
  }, p.timeoutMs);
  function finish(reply: Result<unknown, RpcError>): void {
    if (done) return;
    done = true;
    clearTimeout(timer);
    p.resolve(reply);
  }
  return finish;
}
