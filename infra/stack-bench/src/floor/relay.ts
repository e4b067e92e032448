import type { JetStreamClient } from '@nats-io/jetstream';
import type { Redis } from 'ioredis';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The floor's outbox relay, as the authority's (services/budget-authority/src/outbox-relay.ts)
 * without leases or checks: XREAD what the outboxes hold (blocking until something is there),
 * publish each event to JetStream with `Nats-Msg-Id` = its id, pipelined on one connection and
 * each ack awaited, XDEL what was stored; after a round smaller than a batch, pause `pauseMs`
 * (the authority's AUTHORITY_RELAY_PAUSE_MS, 20 ms) so that the next one carries several events.
 */
export class Relay {
  #running = false;
  #loop: Promise<void> | undefined;

  constructor(
    private readonly o: {
      /** Its own connection: XREAD BLOCK holds it. */
      redis: Redis;
      js: JetStreamClient;
      outboxes: readonly string[];
      batch: number;
      pauseMs: number;
      blockMs: number;
    },
  ) {}

  start(): void {
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.o.redis.disconnect();
    await this.#loop;
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
    const { redis, js, outboxes, batch, blockMs } = this.o;
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
      await Promise.all(entries.map(([, f]) => js.publish(f[1]!, f[5], { msgID: f[3]! })));
      await redis.xdel(key, ...entries.map(([id]) => id));
      relayed += entries.length;
    }
    return relayed;
  }
}
