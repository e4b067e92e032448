import { NAMES, type AdmitRequest, type Caller, type SettleRequest } from './protocol.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface Window {
  name: string;
  unit: 'tokens' | 'usd';
  /** Tokens, or micro-USD. */
  limit: number;
  bucketMs: number;
  buckets: number;
}

/** A tenant's windows, in the order floor.lua checks them (always three). */
export interface Plan {
  windows: readonly [Window, Window, Window];
  /** Micro-USD per token. */
  price: { input: number; output: number };
}

/**
 * The bench config's call (bench-config.yaml): team bench-team (month tokens, day USD) under
 * org bench-org (month USD), gpt-4o-mini's prices, limits no run reaches.
 */
export const BENCH_PLAN: Plan = {
  windows: [
    { name: 'bench-team/month-tokens', unit: 'tokens', limit: 1e12, bucketMs: DAY, buckets: 30 },
    { name: 'bench-team/day-usd', unit: 'usd', limit: 1e14, bucketMs: HOUR, buckets: 24 },
    { name: 'bench-org/month-usd', unit: 'usd', limit: 1e15, bucketMs: DAY, buckets: 30 },
  ],
  price: { input: 0.15, output: 0.6 },
};

/** The bench key (`sk-hf-bench-stack`, stack.ts BENCH_KEY) by its sha256, as the config has it. */
export const BENCH_KEYS: ReadonlyMap<string, Caller> = new Map([
  [
    '3ac2a1b31f50d3a06511ac17bd27309aee877fdeb0f821c88c0d919a19b6fc3a',
    { tenant: 'bench-team', org: 'bench-org', keyId: 'bench-1', useCase: 'UC-BENCH' },
  ],
]);

/** One FCALL: the function, its keys and its arguments (floor.lua's header lists them). */
export interface FloorCall {
  fn: 'floor_admit' | 'floor_settle';
  keys: [string, string, string];
  args: string[];
}

/** Tokens and micro-USD (rounded up) of `input` and `output` tokens. */
export function cost(plan: Plan, input: number, output: number): { tokens: number; usd: number } {
  return {
    tokens: input + output,
    usd: Math.ceil(input * plan.price.input + output * plan.price.output),
  };
}

/** ARGV[2..13]: each window's limit, bucket width and count, then their names. */
function windowArgs(plan: Plan): string[] {
  const w = plan.windows;
  return [
    ...w.flatMap((x) => [String(x.limit), String(x.bucketMs), String(x.buckets)]),
    ...w.map((x) => x.name),
  ];
}

/** The event's fixed members, JSON without braces. */
function fixedFields(r: Caller & { model: string }): string {
  const { tenant, org, keyId, useCase, model } = r;
  return JSON.stringify({ tenant, org, keyId, useCase, model }).slice(1, -1);
}

const keys = (org: string, reservationId: string): FloorCall['keys'] => [
  `${NAMES.keyPrefix}:{${org}}:w`,
  `${NAMES.keyPrefix}:{${org}}:hold:${reservationId}`,
  `${NAMES.keyPrefix}:{${org}}:outbox`,
];

const eventSubject = (tenant: string, type: string) => `${NAMES.events}.${tenant}.${type}`;

/** Per window, its amount of `c` in its unit. */
const amounts = (plan: Plan, c: { tokens: number; usd: number }) =>
  plan.windows.map((w) => String(w.unit === 'tokens' ? c.tokens : c.usd));

/**
 * Builds the floor's FCALLs of one tenant's plan. What does not change from call to call (the
 * windows' arguments, an event's fixed members by caller and model) is built once.
 */
export class CallBuilder {
  readonly #windows: string[];
  readonly #fixed = new Map<string, string>();

  constructor(
    private readonly plan: Plan,
    private readonly leaseMs: number,
  ) {
    this.#windows = windowArgs(plan);
  }

  #fixedOf(r: Caller & { model: string }): string {
    const id = `${r.tenant}\n${r.keyId}\n${r.useCase}\n${r.model}`;
    let f = this.#fixed.get(id);
    if (f === undefined) this.#fixed.set(id, (f = fixedFields(r)));
    return f;
  }

  admit(r: AdmitRequest, ids: { event: string; reservation: string }, now: number): FloorCall {
    const held = cost(this.plan, r.prompt, r.maxTokens);
    const perCall = `"promptTokens":${r.prompt},"maxTokens":${r.maxTokens}`;
    const type = 'reservation.created';
    return this.#call('floor_admit', r, { ...ids, now, lease: this.leaseMs, type, perCall }, held);
  }

  settle(r: SettleRequest, eventId: string, now: number): FloorCall {
    const billed = cost(this.plan, r.prompt, r.completion);
    const perCall = `"promptTokens":${r.prompt},"completionTokens":${r.completion}`;
    const type = 'reservation.settled';
    const ids = { event: eventId, reservation: r.reservationId };
    return this.#call('floor_settle', r, { ...ids, now, lease: 0, type, perCall }, billed);
  }

  /** The arguments in floor.lua's order; `amount` is held (admit) or billed (settle). */
  #call(
    fn: FloorCall['fn'],
    r: Caller & { model: string },
    e: {
      event: string;
      reservation: string;
      now: number;
      lease: number;
      type: string;
      perCall: string;
    },
    amount: { tokens: number; usd: number },
  ): FloorCall {
    return {
      fn,
      keys: keys(r.org, e.reservation),
      args: [
        String(e.now),
        ...this.#windows,
        e.event,
        e.reservation,
        String(e.lease),
        this.#fixedOf(r),
        `${e.perCall},"tokens":${amount.tokens},"microUsd":${amount.usd}`,
        ...amounts(this.plan, amount),
        eventSubject(r.tenant, e.type),
      ],
    };
  }
}
