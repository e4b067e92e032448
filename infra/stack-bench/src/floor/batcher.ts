import { subject, type Batch, type Op, type Reply, type Request } from './protocol.js';

interface Pending {
  op: Op;
  body: Request<Op>;
  resolve: (reply: Reply<Op>) => void;
  reject: (err: Error) => void;
}

/**
 * The edge's side of `<authority>.batch`: the requests asked in one turn of the event loop
 * leave as one message at its end (setImmediate), to `<inbox>.<n>`, and its one reply (an
 * array in their order) answers them all. As the real edge's RequestBatcher, without its
 * partial replies, sizes and fallbacks.
 */
export class Batcher {
  #queue: Pending[] = [];
  #sent = 0;
  readonly #open = new Map<string, { items: Pending[]; timer: NodeJS.Timeout }>();

  constructor(
    private readonly o: {
      publish: (subject: string, data: string, reply: string) => void;
      /** Where replies come: `<inbox>.<n>`. */
      inbox: string;
      timeoutMs: number;
    },
  ) {}

  request<O extends Op>(op: O, body: Request<O>): Promise<Reply<O>> {
    return new Promise<Reply<Op>>((resolve, reject) => {
      if (this.#queue.length === 0) setImmediate(() => this.#flush());
      this.#queue.push({ op, body, resolve, reject });
    }) as Promise<Reply<O>>;
  }

  /** A reply on `<inbox>.<n>`: the answers of batch n, in its order. */
  reply(subject: string, data: string): void {
    const open = this.#open.get(subject);
    if (!open) return;
    this.#open.delete(subject);
    clearTimeout(open.timer);
    const replies = JSON.parse(data) as Array<Reply<Op>>;
    open.items.forEach((p, i) => {
      const r = replies[i];
      if (r) p.resolve(r);
      else p.reject(new Error(`no answer for item ${i} of ${subject}`));
    });
  }

  #flush(): void {
    const items = this.#queue;
    this.#queue = [];
    const reply = `${this.o.inbox}.${++this.#sent}`;
    const timer = setTimeout(() => {
      this.#open.delete(reply);
      for (const p of items) p.reject(new Error(`no reply within ${this.o.timeoutMs} ms`));
    }, this.o.timeoutMs);
    this.#open.set(reply, { items, timer });
    const batch = { items: items.map(({ op, body }) => ({ op, body })) } as Batch;
    this.o.publish(subject('batch'), JSON.stringify(batch), reply);
  }
}
