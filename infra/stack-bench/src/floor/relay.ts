import { JetStreamPublisher } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The floor's outbox relay, as the authority's (services/budget-authority/src/outbox-relay.ts)
 * without leases or checks: XREAD what the outboxes hold (blocking until something is there),
 * publish each event to JetStream with `Nats-Msg-Id` = its id through the authority's
 * publisher (`JetStreamPublisher`: an outbox's events pipelined on one connection, each ack
 * awaited on one inbox), XDEL what was stored; after a round smaller than a batch, pause
 * `pauseMs` (the authority's AUTHORITY_RELAY_PAUSE_MS) so that the next one carries several.
 */
export class Relay {
  #running = false;
  #loop: Promise<void> | undefined;
  readonly #publisher: JetStreamPublisher;

  constructor(
    private readonly o: {
      /** Its own connection: XREAD BLOCK holds it. */
      redis: Redis;
      nc: NatsConnection;
      outboxes: readonly string[];
      batch: number;
      pauseMs: number;
      blockMs: number;
    },
  ) {
    this.#publisher = new JetStreamPublisher(o.nc);
  }

  start(): void {
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.o.redis.disconnect();
    await this.#loop;
    this.#publisher.close();
  }

  async #run(): Promise<void> {
    while (this.#running) {
      try {
        const relayed = await this.#once();
        if (relayed > 0 && relayed < this.o.batch) await sleep(this.o.pauseMs);
      } catch (err) {
        if (!this.#running) break;
        process.stderr.write(`floor relay: ${String(err)}\n`);
        await sleep(100);
      }
    }
  }

  async #once(): Promise<number> {
    const { redis, outboxes, batch, blockMs } = this.o;
    const zeros = outboxes.map(() => '0');
    const reply = await redis.xread(
      'COUNT',
      batch,
      'BLOCK',
      blockMs,
      'STREAMS',
      ...outboxes,
      ...zeros,
    );
    if (!reply) return 0;
    let relayed = 0;
    for (const [key, entries] of reply) {
      // Each entry's fields as floor.lua writes them: `s` subject, `i` event id, `e` its JSON.
      await this.#publisher.publish(
        entries.map(([, f]) => ({ subject: f[1]!, data: f[5]!, msgId: f[3]! })),
        2_000,
      );
      await redis.xdel(key, ...entries.map(([id]) => id));
      relayed += entries.length;
    }
    return relayed;
  }
}
