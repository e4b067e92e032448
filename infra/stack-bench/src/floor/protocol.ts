/**
 * What the floor's processes say to each other (floor/README in docs/benchmarks.md, "Issue 14:
 * the floor of the architecture"): NATS subjects, the events stream and its two durables, and
 * the request and reply bodies, JSON with short names. Nothing is validated beyond JSON.parse:
 * the floor measures the architecture's cost, not ours.
 */
export const NAMES = {
  /** `<authority>.admit`, `.settle` (one request a message) and `.batch` (several). */
  authority: 'floor.authority',
  queue: 'floor-authority',
  stream: 'FLOOR_EVENTS',
  /** `<events>.<tenant>.<type>` */
  events: 'floor.events',
  aggregator: 'floor-aggregator',
  alerter: 'floor-alerter',
  /** Redis keys: `floor:{<org>}:...` (one slot per org, as the authority's). */
  keyPrefix: 'floor',
  /** ClickHouse: `floor.events`. */
  database: 'floor',
} as const;

/** Who calls: what the edge's key lookup gives. */
export interface Caller {
  tenant: string;
  org: string;
  keyId: string;
  useCase: string;
}

export interface AdmitRequest extends Caller {
  model: string;
  /** Prompt tokens, a bound from the body's size (the floor counts nothing). */
  prompt: number;
  maxTokens: number;
}

export interface SettleRequest extends Caller {
  model: string;
  reservationId: string;
  prompt: number;
  completion: number;
}

export type AdmitReply =
  | { ok: true; reservationId: string }
  | { ok: false; code: 'budget_exceeded'; window: number }
  | { ok: false; code: 'duplicate' | 'unknown_tenant' };

export type SettleReply = { ok: true } | { ok: false; code: 'no_hold' | 'unknown_tenant' };

export type Op = 'admit' | 'settle';
export type Request<O extends Op> = O extends 'admit' ? AdmitRequest : SettleRequest;
export type Reply<O extends Op> = O extends 'admit' ? AdmitReply : SettleReply;

/** `<authority>.batch`: several requests in one message, answered by one array in their order. */
export interface Batch {
  items: Array<{ op: 'admit'; body: AdmitRequest } | { op: 'settle'; body: SettleRequest }>;
}

export const subject = (op: Op | 'batch') => `${NAMES.authority}.${op}`;
