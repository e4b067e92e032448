import {
  BatchReply,
  ERROR_HEADER,
  ERROR_MESSAGE_HEADER,
  MAX_BATCH_ITEMS,
  type BatchedOperation,
  type NatsNames,
} from '@holdfast/events';
import {
  createInbox,
  type Msg,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import type { z } from 'zod';
import { Err, type Result } from './errors.js';
import {
  authoritySubject,
  codedError,
  DEFAULT_MAX_PAYLOAD,
  parseReply,
  request,
  RpcError,
} from './rpc.js';

interface Pending {
  op: BatchedOperation;
  body: unknown;
  schema: z.ZodType;
  timeoutMs: number;
  resolve: (reply: Result<unknown, RpcError>) => void;
}

/** A batch sent and not fully answered: its items, each cleared once answered. */
interface Open {
  items: (Pending | undefined)[];
  left: number;
  timers: NodeJS.Timeout[];
}

/** After a batch found no responder but its items alone did (an older authority), requests go alone this long. */
const ALONE_FOR_MS = 10_000;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * Coalesces the call path's requests (admit, settle, release, extend, renew) made in one turn of
 * the event loop into one `batch` message. Under load an edge asks for many at the same moment,
 * and every message costs each process it crosses a wake-up: one message instead of n saves the
 * edge, the NATS server and the authority most of that. Nothing waits for company: the batch
 * leaves at the end of the turn (setImmediate, after the I/O callbacks that asked), and a
 * request that is alone in its turn goes as itself, so at low rates nothing changes.
 *
 * Each item is answered as if it had come alone: its own reply schema, its own error code, its
 * own timeout. The authority answers what is ready together in one reply and a straggler in a
 * later one (all to this batcher's inbox), so an item whose Redis node is failing over does not
 * hold up the others of its batch.
 */
export class RequestBatcher {
  #queue: Pending[] = [];
  #aloneUntil = 0;
  readonly #inbox = createInbox();
  #sub: Subscription | undefined;
  #sent = 0;
  readonly #open = new Map<string, Open>();

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
      this.#send(queue.slice(i, i + MAX_BATCH_ITEMS));
    }
  }

  /**
   * Sends one item as itself. `probe`: its batch found no responder; if the item alone is
   * answered, the authority does not serve `batch` (an older one), and later items go alone
   * too. If nobody answers it either, no authority is there at all (down): batching goes on,
   * so the requests made together when it is back still reach it in one message.
   */
  #alone(p: Pending, probe = false): void {
    const subject = authoritySubject(this.names, p.op);
    void request(this.nc, subject, p.body, p.schema, p.timeoutMs).then((reply) => {
      if (probe && (reply.ok || reply.error.code !== 'no_responders')) {
        this.#aloneUntil = Date.now() + ALONE_FOR_MS;
      }
      p.resolve(reply);
    });
  }

  #send(items: Pending[]): void {
    if (items.length === 1 || Date.now() < this.#aloneUntil) {
      for (const p of items) this.#alone(p);
      return;
    }
    const body = encoder.encode(
      JSON.stringify({ items: items.map(({ op, body: item }) => ({ op, body: item })) }),
    );
    if (body.length > (this.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD)) {
      const half = Math.ceil(items.length / 2);
      this.#send(items.slice(0, half));
      this.#send(items.slice(half));
      return;
    }
    this.#listen();
    const reply = `${this.#inbox}.${++this.#sent}`;
    const open: Open = { items: [...items], left: items.length, timers: [] };
    this.#open.set(reply, open);
    // One timer per distinct timeout (an edge has two: admits and closes).
    for (const ms of new Set(items.map((p) => p.timeoutMs))) {
      open.timers.push(setTimeout(() => this.#timeout(reply, ms), ms));
    }
    try {
      this.nc.publish(authoritySubject(this.names, 'batch'), body, { reply });
    } catch (err) {
      // The connection is closed or draining: every item fails as a request would.
      this.#answerAll(reply, () =>
        Err(
          new RpcError({ code: 'timeout', message: 'NATS unavailable', retry: true, cause: err }),
        ),
      );
    }
  }

  /** Subscribes to this batcher's inbox, where every batch's replies come, once. */
  #listen(): void {
    if (this.#sub) return;
    this.#sub = this.nc.subscribe(`${this.#inbox}.*`, {
      callback: (err, msg) => {
        if (!err) this.#reply(msg);
      },
    });
  }

  /** One reply to a batch: some of its items' answers, an error for all, or nobody there. */
  #reply(msg: Msg): void {
    const open = this.#open.get(msg.subject);
    if (!open) return;
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      // No responder for `batch`: an older authority, or none at all. The items go alone.
      this.#answerAll(msg.subject, undefined);
      return;
    }
    const code = msg.headers?.get(ERROR_HEADER);
    if (code) {
      const message = msg.headers?.get(ERROR_MESSAGE_HEADER) ?? code;
      this.#answerAll(msg.subject, () => Err(codedError(code, message)));
      return;
    }
    let parsed: Result<BatchReply, RpcError> | undefined;
    try {
      parsed = parseReply(BatchReply, JSON.parse(decoder.decode(msg.data)), msg.subject);
    } catch {
      parsed = undefined;
    }
    if (!parsed?.ok) {
      this.#answerAll(msg.subject, (p) =>
        Err(new RpcError({ code: 'internal', message: `malformed reply on ${this.#subject(p)}` })),
      );
      return;
    }
    for (const a of parsed.value.items) {
      const p = open.items[a.i];
      if (!p) continue;
      this.#answer(msg.subject, open, a.i, () =>
        a.ok ? parseReply(p.schema, a.value, this.#subject(p)) : Err(codedError(a.code, a.message)),
      );
    }
  }

  /** The items still waiting on `ms` time out: no reply within their own timeout. */
  #timeout(reply: string, ms: number): void {
    const open = this.#open.get(reply);
    if (!open) return;
    open.items.forEach((p, i) => {
      if (p?.timeoutMs !== ms) return;
      this.#answer(reply, open, i, () =>
        Err(
          new RpcError({
            code: 'timeout',
            message: `no reply on ${this.#subject(p)} within ${ms} ms`,
            retry: true,
          }),
        ),
      );
    });
  }

  /** Answers every item still waiting; `undefined` sends each alone instead. */
  #answerAll(reply: string, result: ((p: Pending) => Result<unknown, RpcError>) | undefined): void {
    const open = this.#open.get(reply);
    if (!open) return;
    open.items.forEach((p, i) => {
      if (!p) return;
      if (result) this.#answer(reply, open, i, () => result(p));
      else {
        this.#answer(reply, open, i, undefined);
        this.#alone(p, true);
      }
    });
  }

  #answer(
    reply: string,
    open: Open,
    i: number,
    result: (() => Result<unknown, RpcError>) | undefined,
  ): void {
    const p = open.items[i];
    if (!p) return;
    open.items[i] = undefined;
    if (result) p.resolve(result());
    if (--open.left === 0) {
      for (const t of open.timers) clearTimeout(t);
      this.#open.delete(reply);
    }
  }

  #subject(p: Pending): string {
    return authoritySubject(this.names, p.op);
  }
}
