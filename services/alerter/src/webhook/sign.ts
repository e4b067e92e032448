import { Webhook } from 'standardwebhooks';

/**
 * Standard Webhooks (https://www.standardwebhooks.com): the body is
 * `{"type", "timestamp", "data"}`, signed as `<webhook-id>.<webhook-timestamp>.<body>` with
 * HMAC-SHA256 under the endpoint's `whsec_...` secret. `webhook-id` is the event id and stays
 * the same on every retry (receivers dedupe on it); the timestamp and signature are made
 * fresh for each attempt, so a receiver's replay window (usually 5 min) accepts a late retry.
 */
export interface SignedRequest {
  body: string;
  headers: Record<string, string>;
}

export function webhookBody(event: Record<string, unknown>): string {
  return JSON.stringify({ type: event.type, timestamp: event.time, data: event });
}

export function signWebhook(opts: {
  secret: string;
  id: string;
  body: string;
  now?: Date;
}): SignedRequest {
  const now = opts.now ?? new Date();
  const signature = new Webhook(opts.secret).sign(opts.id, now, opts.body);
  return {
    body: opts.body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'holdfast-alerter/1',
      'webhook-id': opts.id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1_000)),
      'webhook-signature': signature,
    },
  };
}
