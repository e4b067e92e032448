import { backoffDelay, type RetryPolicy } from '@holdfast/retry';
import type { JsMsg } from '@nats-io/jetstream';

/** Hands a message back for redelivery after the policy's delay for its delivery count. */
export function nakLater(msg: JsMsg, policy: RetryPolicy): number {
  const delayMs = backoffDelay(policy, msg.info.deliveryCount);
  msg.nak(delayMs);
  return delayMs;
}

/** How often to say `working()`: a third of the ack wait, so one lost signal is not fatal. */
export function workingEveryMs(ackWaitMs: number): number {
  return Math.max(500, Math.floor(ackWaitMs / 3));
}

/**
 * Runs `work`, telling JetStream that `msgs` are still in progress while it runs, so a slow
 * step (a long insert) does not get them redelivered to another replica meanwhile.
 */
export async function keepWorking<T>(
  msgs: () => Iterable<JsMsg>,
  ackWaitMs: number,
  work: () => Promise<T>,
): Promise<T> {
  const timer = setInterval(() => {
    for (const m of msgs()) m.working();
  }, workingEveryMs(ackWaitMs));
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
