import { randomUUID } from 'node:crypto';
import {
  eventSubject,
  HoldfastEvent,
  type EventOf,
  type NatsNames,
  type WindowState,
} from '@holdfast/events';
import { jetstream } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';

/**
 * Valid events built with the schemas (each one is parsed before it is returned), for tests
 * and benchmarks that publish straight to JetStream.
 */

export interface CallShape {
  tenant?: string;
  org?: string;
  keyId?: string | null;
  useCase?: string;
  model?: string;
  /** ms since epoch of the first event of the call. */
  atMs?: number;
  prompt?: number;
  completion?: number;
  /** micro-USD per token for the cost (integer arithmetic). */
  microUsdPerToken?: number;
  /** The surface (chat by default) and the parts of the usage (0 by default). */
  api?: 'chat' | 'responses' | 'messages' | 'embeddings';
  parts?: {
    cached?: number;
    cacheWrite5m?: number;
    cacheWrite1h?: number;
    reasoning?: number;
    audioPrompt?: number;
    audioCompletion?: number;
  };
}

/** A month-tokens window of `tenant` (limit 1,000,000, enforced). */
export function window(tenant: string, used: number, held: number): WindowState {
  return {
    tenant,
    budget: 'month-tokens',
    window: 'month',
    unit: 'tokens',
    limit: 1_000_000,
    used,
    held,
    enforce: true,
  };
}

const base = (type: string, tenant: string, org: string, atMs: number) => ({
  id: randomUUID(),
  schemaVersion: 1 as const,
  type,
  time: new Date(atMs).toISOString(),
  tenant,
  org,
});

/** A reserve-mode call that was admitted and settled: created + settled. */
export function settledCall(
  c: CallShape = {},
): [EventOf<'reservation.created'>, EventOf<'reservation.settled'>] {
  const tenant = c.tenant ?? 'batch-summariser';
  const org = c.org ?? tenant;
  const at = c.atMs ?? Date.now();
  const prompt = c.prompt ?? 370;
  const completion = c.completion ?? 512;
  const held = prompt + 1024;
  const price = c.microUsdPerToken ?? 1;
  const call = {
    reservationId: randomUUID(),
    keyId: c.keyId === undefined ? 'batch-1' : c.keyId,
    useCase: c.useCase ?? 'UC-112',
    model: c.model ?? 'gpt-4o-mini',
    mode: 'reserve' as const,
    api: c.api ?? 'chat',
  };
  const created = HoldfastEvent.parse({
    ...base('reservation.created', tenant, org, at),
    ...call,
    heldTokens: held,
    heldMicroUsd: held * price,
    promptTokens: prompt,
    maxTokens: 1024,
    requestedMaxTokens: 1024,
    chargedTokens: 0,
    chargedMicroUsd: 0,
    expiresAt: new Date(at + 1_800_000).toISOString(),
    windows: [window(tenant, 0, held)],
  }) as EventOf<'reservation.created'>;
  const billed = prompt + completion;
  const settled = HoldfastEvent.parse({
    ...base('reservation.settled', tenant, org, at + 800),
    ...call,
    heldTokens: held,
    heldMicroUsd: held * price,
    promptTokens: prompt,
    completionTokens: completion,
    cachedPromptTokens: c.parts?.cached ?? 0,
    cacheWrite5mTokens: c.parts?.cacheWrite5m ?? 0,
    cacheWrite1hTokens: c.parts?.cacheWrite1h ?? 0,
    reasoningTokens: c.parts?.reasoning ?? 0,
    audioPromptTokens: c.parts?.audioPrompt ?? 0,
    audioCompletionTokens: c.parts?.audioCompletion ?? 0,
    billedTokens: billed,
    costMicroUsd: billed * price,
    chargedTokens: billed,
    chargedMicroUsd: billed * price,
    outcome: 'completed',
    durationMs: 800,
    windows: [window(tenant, billed, 0)],
  }) as EventOf<'reservation.settled'>;
  return [created, settled];
}

/** A call's move to a fallback upstream (`capacity.move`), 400 ms after `created`. */
export function moved(created: EventOf<'reservation.created'>): EventOf<'reservation.moved'> {
  return HoldfastEvent.parse({
    ...base('reservation.moved', created.tenant, created.org, Date.parse(created.time) + 400),
    reservationId: created.reservationId,
    model: created.model,
    upstream: 'backup',
    fromUpstream: 'default',
    tokens: created.promptTokens + created.requestedMaxTokens,
    fromUsedTokens: 120,
  }) as EventOf<'reservation.moved'>;
}

/** A retry of the call taking a request of its upstream (`capacity.retry`), 300 ms after `created`. */
export function retried(created: EventOf<'reservation.created'>): EventOf<'reservation.retried'> {
  return HoldfastEvent.parse({
    ...base('reservation.retried', created.tenant, created.org, Date.parse(created.time) + 300),
    reservationId: created.reservationId,
    model: created.model,
    upstream: 'default',
  }) as EventOf<'reservation.retried'>;
}

/** A refusal (budget_exceeded unless said otherwise). */
export function refusal(
  c: CallShape & { code?: string; shadow?: boolean } = {},
): EventOf<'admission.refused'> {
  const tenant = c.tenant ?? 'batch-summariser';
  return HoldfastEvent.parse({
    ...base('admission.refused', tenant, c.org ?? tenant, c.atMs ?? Date.now()),
    reservationId: randomUUID(),
    keyId: c.keyId === undefined ? 'batch-1' : c.keyId,
    useCase: c.useCase ?? 'UC-112',
    model: c.model ?? 'gpt-4o-mini',
    mode: 'reserve',
    code: c.code ?? 'budget_exceeded',
    message: 'This call could use up to 1,394 tokens and team batch-summariser has 210 left.',
    promptTokens: c.prompt ?? 370,
    maxTokens: 1024,
    neededTokens: (c.prompt ?? 370) + 1024,
    neededMicroUsd: 0,
    budget: 'month-tokens',
    level: tenant,
    retryAfterSeconds: 60,
    shadow: c.shadow ?? false,
    windows: [window(tenant, 39_790, 0)],
  }) as EventOf<'admission.refused'>;
}

const encoder = new TextEncoder();

/**
 * Publishes events to the stream with `Nats-Msg-Id` = id (or `msgId` to force a second copy
 * of the same event past the stream's duplicate detection). Waits for every publish ack.
 */
export async function publishEvents(
  nc: NatsConnection,
  names: NatsNames,
  events: HoldfastEvent[],
  opts: { msgId?: (e: HoldfastEvent) => string; inFlight?: number } = {},
): Promise<void> {
  const js = jetstream(nc);
  const inFlight = opts.inFlight ?? 256;
  for (let i = 0; i < events.length; i += inFlight) {
    await Promise.all(
      events.slice(i, i + inFlight).map((e) =>
        js.publish(eventSubject(names, e.tenant, e.type), encoder.encode(JSON.stringify(e)), {
          msgID: opts.msgId ? opts.msgId(e) : e.id,
        }),
      ),
    );
  }
}

/** Publishes raw bytes (a poison message) on an events subject. */
export async function publishRaw(
  nc: NatsConnection,
  names: NatsNames,
  subjectTail: string,
  data: string,
): Promise<void> {
  const h = headers();
  h.set('Nats-Msg-Id', randomUUID());
  await jetstream(nc).publish(`${names.eventsPrefix}.${subjectTail}`, encoder.encode(data), {
    headers: h,
  });
}
