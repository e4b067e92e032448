import { randomUUID } from 'node:crypto';
import { EVENT_EXAMPLES, EXAMPLE_WINDOW } from '@holdfast/events/testing';

/** A delivery as `BatchCommit.accept` reads it: the event's bytes and its ack subject. */
export interface Delivery {
  data: Uint8Array;
  reply: string;
}

/**
 * `bench:consumers`' calls as the authority publishes them: 1,000 calls, a created and a
 * settled event each, three windows each (the team's tokens, its day in USD, the org's month).
 */
export function deliveries(): Delivery[] {
  const windows = [
    EXAMPLE_WINDOW,
    { ...EXAMPLE_WINDOW, budget: 'day-usd', window: 'day', unit: 'usd' },
    { ...EXAMPLE_WINDOW, tenant: 'acme', budget: 'month-usd', unit: 'usd' },
  ];
  const out: Delivery[] = [];
  for (let i = 0; i < 1_000; i++) {
    for (const type of ['reservation.created', 'reservation.settled'] as const) {
      const e = { ...EVENT_EXAMPLES[type], id: randomUUID(), windows };
      const seq = out.length + 1;
      out.push({
        data: new TextEncoder().encode(JSON.stringify(e)),
        reply: `$JS.ACK.events.billing.1.${seq}.${seq}.1765100000000000000.0`,
      });
    }
  }
  return out;
}
