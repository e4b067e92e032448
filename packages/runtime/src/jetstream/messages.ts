import { backoffDelay, type RetryPolicy } from '@holdfast/retry';
import type { JsMsg } from '@nats-io/jetstream';
import { RequestError } from '@nats-io/transport-node';

/** The server's default ack wait, for a durable whose config does not set one. */
export const DEFAULT_ACK_WAIT_MS = 30_000;
/** How long a nak waits for the consumer leader's answer (then it is not known to be taken). */
const NAK_ANSWER_MS = 1_000;
/** Between two sends of one nak that reached nobody (no responders comes back at once). */
const NAK_RESEND_MS = 250;

/** Where the stream sequence sits in a reply subject, by the subject's token count. */
const SEQ_TOKEN_OLD = 5; // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
const SEQ_TOKEN_NEW = 7; // $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>...

/**
 * `msg.seq` without the library's whole delivery info: nats.js splits the reply subject into
 * tokens and builds an object of ten fields (parsing five numbers) to read one of them, and the
 * aggregator, which keeps every message up to its batch's insert, reads only this one (issue
 * 14). The same number for both subject layouts, and the same throw for a reply that is no
 * JetStream delivery (stream-sequence.unit.test.ts holds it to the library's).
 */
export function streamSequence(msg: JsMsg): number {
  // nats.js's JsMsg keeps its reply subject (`JsMsgImpl.reply`), which its public type leaves out.
  const s = (msg as JsMsg & { readonly reply?: unknown }).reply;
  if (typeof s !== 'string') return msg.seq;
  const dots: number[] = [];
  if (s.startsWith('$JS.ACK.')) {
    for (let i = s.indexOf('.'); i !== -1; i = s.indexOf('.', i + 1)) dots.push(i);
  }
  const tokens = dots.length + 1;
  const k = tokens === 9 ? SEQ_TOKEN_OLD : tokens >= 11 ? SEQ_TOKEN_NEW : -1;
  if (k < 0) throw new Error('unable to parse delivery info - not a jetstream message');
  return parseInt(s.slice(dots[k - 1]! + 1, dots[k]), 10);
}

/**
 * Hands a message back for redelivery after the policy's delay for its delivery count (see
 * `nakConfirmed`: sent again while no consumer leader is there to take it). Returns the delay.
 */
export function nakLater(
  msg: JsMsg,
  policy: RetryPolicy,
  ackWaitMs: number = DEFAULT_ACK_WAIT_MS,
): number {
  const delayMs = backoffDelay(policy, msg.info.deliveryCount);
  void nakConfirmed(msg, delayMs, ackWaitMs);
  return delayMs;
}

/**
 * Naks `msg` with `delayMs` as a request the consumer's leader answers (`nakAck`), and sends it
 * again while it reaches nobody: a nak published and forgotten while the consumer has no leader
 * (a node killed, an election) is lost, and the message would wait out its ack wait, not the
 * delay. Sent again `NAK_RESEND_MS` after each no-responders answer, until `ackWaitMs` (the ack
 * wait has redelivered it by then anyway) or the connection is closed.
 *
 * A nak without an answer within `NAK_ANSWER_MS` is not sent again: it may have been taken, its
 * answer late (a loaded box, a slow network). nats-server 2.9 applies a nak of any earlier
 * delivery of a message to its current one (`processNak` checks only that the sequence is
 * pending), so a second nak that arrives after the first one's delay hands back the message's
 * next delivery, perhaps in flight at another replica: a third delivery at once, two webhook
 * POSTs of one job (nak.late-answer.int.test.ts). Left unanswered by a leader killed before it
 * read it, the message comes back after its ack wait instead of the delay.
 *
 * The nak is final at once (later `working()` and acks on `msg` are ignored); the caller need
 * not wait: the promise never rejects, and resolves true once a leader took the nak, false when
 * that is not known.
 */
export async function nakConfirmed(
  msg: JsMsg,
  delayMs: number,
  ackWaitMs: number = DEFAULT_ACK_WAIT_MS,
): Promise<boolean> {
  const until = Date.now() + ackWaitMs;
  for (;;) {
    const sentAt = Date.now();
    try {
      return await msg.nakAck(delayMs, { timeout: Math.min(NAK_ANSWER_MS, until - sentAt) });
    } catch (err) {
      // Only a nak that reached nobody is sent again (above).
      if (!(err instanceof RequestError && err.isNoResponders())) return false;
    }
    const next = Math.max(sentAt + NAK_RESEND_MS, Date.now());
    if (next >= until) return false;
    await pause(next - Date.now());
  }
}

/** A wait that does not keep the process alive (a nak in flight at exit is not waited for). */
function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** How often to say `working()`: a third of the ack wait, so one lost signal is not fatal. */
export function workingEveryMs(ackWaitMs: number): number {
  return Math.max(500, Math.floor(ackWaitMs / 3));
}
