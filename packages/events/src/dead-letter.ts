/**
 * The dead-letter format, one for every service. A message a service gives up on (it does not
 * parse, it does not fit, it can never be handled) is published, its bytes unchanged, on
 * `deadLetterSubject(names, source)`, kept 30 days by the dead-letter stream, with these headers.
 * docs/events.md says where an operator finds them.
 */
export const DEAD_LETTER_HEADERS = {
  /** Why it was parked: one line, at most 1,000 characters. */
  reason: 'Holdfast-Dead-Letter-Reason',
  /** The service that parked it (`billing-aggregator`, `alerter`, `budget-authority`). */
  service: 'Holdfast-Dead-Letter-Service',
  /** The subject it was published on (for an outbox entry: the subject it was meant for). */
  subject: 'Holdfast-Original-Subject',
  /** The JetStream stream it was read from. */
  stream: 'Holdfast-Original-Stream',
  /** Its sequence in that stream. */
  streamSeq: 'Holdfast-Stream-Seq',
  /** How many times JetStream had delivered it when it was parked. */
  deliveryCount: 'Holdfast-Delivery-Count',
  /** An outbox entry that never reached a stream: `<redis key> <entry id>`. */
  outboxEntry: 'Holdfast-Outbox-Entry',
} as const;

/** What a dead letter says about itself; only `reason` and `service` are always there. */
export interface DeadLetterInfo {
  reason: string;
  service: string;
  subject?: string;
  stream?: string;
  streamSeq?: number;
  deliveryCount?: number;
  outboxEntry?: string;
}

const MAX_REASON = 1_000;

/** The header pairs to publish a dead letter with (header values hold no line breaks). */
export function deadLetterHeaders(info: DeadLetterInfo): [string, string][] {
  const out: [string, string][] = [];
  for (const [key, name] of Object.entries(DEAD_LETTER_HEADERS)) {
    const value = info[key as keyof DeadLetterInfo];
    if (value === undefined) continue;
    out.push([
      name,
      String(value)
        .replace(/[\r\n]+/g, ' ')
        .slice(0, MAX_REASON),
    ]);
  }
  return out;
}

/** Reads a dead letter's headers back (`get` is e.g. `msg.headers.get.bind(msg.headers)`). */
export function readDeadLetterHeaders(get: (name: string) => string): DeadLetterInfo {
  const text = (name: string) => get(name) || undefined;
  const count = (name: string) => {
    const n = Number(get(name) || Number.NaN);
    return Number.isInteger(n) ? n : undefined;
  };
  const h = DEAD_LETTER_HEADERS;
  return {
    reason: get(h.reason),
    service: get(h.service),
    subject: text(h.subject),
    stream: text(h.stream),
    streamSeq: count(h.streamSeq),
    deliveryCount: count(h.deliveryCount),
    outboxEntry: text(h.outboxEntry),
  };
}
