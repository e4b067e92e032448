import { z } from 'zod';

/** Messages through nats-server, from its monitoring port (`nats-server -m`). */
export interface NatsCounts {
  /** Messages clients published to the server (requests, replies, events, acks, pulls). */
  inMsgs: number;
  /** Messages the server delivered to clients. */
  outMsgs: number;
  inBytes: number;
  outBytes: number;
  /** The same per connection name (edge, authority, ...), summed over its connections. */
  byClient: Record<string, { inMsgs: number; outMsgs: number }>;
}

const Varz = z.object({
  in_msgs: z.number(),
  out_msgs: z.number(),
  in_bytes: z.number(),
  out_bytes: z.number(),
});

const Connz = z.object({
  connections: z
    .array(
      z.object({
        name: z.string().optional(),
        // Seen from the client: in_msgs are what the server received from it.
        in_msgs: z.number(),
        out_msgs: z.number(),
      }),
    )
    .default([]),
});

const Jsz = z.object({
  account_details: z
    .array(
      z.object({
        stream_detail: z
          .array(
            z.object({
              name: z.string(),
              state: z.object({ last_seq: z.number() }),
              consumer_detail: z
                .array(
                  z.object({
                    name: z.string(),
                    num_pending: z.number(),
                    num_ack_pending: z.number(),
                  }),
                )
                .default([]),
            }),
          )
          .default([]),
      }),
    )
    .default([]),
});

/** Where JetStream stands: the last sequence of every stream and what consumers still owe. */
export interface StreamBacklog {
  lastSeqs: string;
  /** Messages not yet delivered or not yet acked, over every consumer. */
  owed: number;
}

export class NatsMonitor {
  constructor(private readonly url: string) {}

  async #get(path: string): Promise<unknown> {
    const res = await fetch(`${this.url}${path}`);
    if (!res.ok) throw new Error(`nats-server ${path}: HTTP ${res.status}`);
    return res.json();
  }

  async counts(): Promise<NatsCounts> {
    const [varz, connz] = await Promise.all([
      this.#get('/varz').then((v) => Varz.parse(v)),
      this.#get('/connz?limit=4096').then((c) => Connz.parse(c)),
    ]);
    const byClient: NatsCounts['byClient'] = {};
    for (const c of connz.connections) {
      // Names may end in a per-process id (`budget-authority-2e41b85e`): one row per service.
      const name = (c.name || 'unnamed').replace(/-[0-9a-f]{8}$/, '');
      const entry = (byClient[name] ??= { inMsgs: 0, outMsgs: 0 });
      entry.inMsgs += c.in_msgs;
      entry.outMsgs += c.out_msgs;
    }
    return {
      inMsgs: varz.in_msgs,
      outMsgs: varz.out_msgs,
      inBytes: varz.in_bytes,
      outBytes: varz.out_bytes,
      byClient,
    };
  }

  async backlog(): Promise<StreamBacklog> {
    const jsz = Jsz.parse(await this.#get('/jsz?accounts=true&streams=true&consumers=true'));
    // The server lists streams in no fixed order.
    const streams = jsz.account_details
      .flatMap((a) => a.stream_detail)
      .sort((a, b) => a.name.localeCompare(b.name));
    return {
      lastSeqs: streams.map((s) => `${s.name}:${s.state.last_seq}`).join(','),
      owed: streams
        .flatMap((s) => s.consumer_detail)
        .reduce((n, c) => n + c.num_pending + c.num_ack_pending, 0),
    };
  }

  /**
   * Waits until the work a phase left behind is done: no stream grew over `quietMs` (the
   * authority's outbox is relayed) and every consumer has delivered and had acked everything
   * (the aggregator inserted its batch, the alerter and the authority's closes consumer
   * caught up). Returns how long that took; gives up after `timeoutMs`.
   */
  async settle(opts: { quietMs: number; timeoutMs: number }): Promise<number> {
    const start = performance.now();
    let last = await this.backlog();
    for (;;) {
      await new Promise((r) => setTimeout(r, opts.quietMs));
      const now = await this.backlog();
      const waited = performance.now() - start;
      if ((now.owed === 0 && now.lastSeqs === last.lastSeqs) || waited > opts.timeoutMs) {
        return waited;
      }
      last = now;
    }
  }
}

/** b - a, per connection name; names missing in `a` (new connections) count from zero. */
export function countsDelta(a: NatsCounts, b: NatsCounts): NatsCounts {
  const byClient: NatsCounts['byClient'] = {};
  for (const [name, c] of Object.entries(b.byClient)) {
    const before = a.byClient[name] ?? { inMsgs: 0, outMsgs: 0 };
    byClient[name] = { inMsgs: c.inMsgs - before.inMsgs, outMsgs: c.outMsgs - before.outMsgs };
  }
  return {
    inMsgs: b.inMsgs - a.inMsgs,
    outMsgs: b.outMsgs - a.outMsgs,
    inBytes: b.inBytes - a.inBytes,
    outBytes: b.outBytes - a.outBytes,
    byClient,
  };
}
