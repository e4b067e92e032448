import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';
import type { CallBuilder, FloorCall } from './plan.js';
import {
  NAMES,
  subject,
  type AdmitReply,
  type AdmitRequest,
  type Batch,
  type Op,
  type SettleReply,
  type SettleRequest,
} from './protocol.js';

/** floor.lua, from src/ (tests) and dist/ (built) alike. */
const LIBRARY = readFileSync(new URL('../../src/floor/floor.lua', import.meta.url), 'utf8');

export async function loadLibrary(redis: Redis): Promise<void> {
  await redis.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY);
}

/** floor_admit's answer: {1} admitted, {0, i} refused by window i, {2} a duplicate id. */
export function admitReply(result: unknown, reservationId: string): AdmitReply {
  const [code, window] = result as [number, number?];
  if (code === 1) return { ok: true, reservationId };
  if (code === 0) return { ok: false, code: 'budget_exceeded', window: window ?? 0 };
  return { ok: false, code: 'duplicate' };
}

/** floor_settle's answer: {1} settled, {0} no such hold. */
export function settleReply(result: unknown): SettleReply {
  return (result as [number])[0] === 1 ? { ok: true } : { ok: false, code: 'no_hold' };
}

type Prepared =
  | { call: FloorCall; answer: (result: unknown) => AdmitReply | SettleReply }
  | { reply: AdmitReply | SettleReply };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The floor's budget authority: a NATS responder in a queue group that runs one FCALL per
 * request (floor.lua) and answers. A request alone is one FCALL; a batch's FCALLs go to Redis
 * as one pipeline and are answered by one message, in their order.
 */
export class FloorAuthority {
  readonly #subs: Subscription[] = [];

  constructor(
    private readonly o: {
      nc: NatsConnection;
      redis: Redis;
      /** Each tenant's call builder (its plan). */
      plans: ReadonlyMap<string, CallBuilder>;
    },
  ) {}

  start(): void {
    const { nc } = this.o;
    const on = (s: string, handle: (m: Msg) => Promise<unknown>) =>
      this.#subs.push(
        nc.subscribe(s, {
          queue: NAMES.queue,
          callback: (err, m) => {
            if (err) return;
            void handle(m).then(
              (reply) => m.respond(encoder.encode(JSON.stringify(reply))),
              (e: unknown) => process.stderr.write(`floor authority: ${String(e)}\n`),
            );
          },
        }),
      );
    const body = <T>(m: Msg) => JSON.parse(decoder.decode(m.data)) as T;
    on(subject('admit'), (m) => this.#one('admit', body<AdmitRequest>(m)));
    on(subject('settle'), (m) => this.#one('settle', body<SettleRequest>(m)));
    on(subject('batch'), (m) => this.#batch(body<Batch>(m)));
  }

  stop(): void {
    for (const s of this.#subs) s.unsubscribe();
  }

  #prepare(op: Op, body: AdmitRequest | SettleRequest): Prepared {
    const plan = this.o.plans.get(body.tenant);
    if (!plan) return { reply: { ok: false, code: 'unknown_tenant' } };
    const now = Date.now();
    if (op === 'admit') {
      const reservation = randomUUID();
      const call = plan.admit(body as AdmitRequest, { event: randomUUID(), reservation }, now);
      return { call, answer: (r) => admitReply(r, reservation) };
    }
    return { call: plan.settle(body as SettleRequest, randomUUID(), now), answer: settleReply };
  }

  async #one(op: Op, body: AdmitRequest | SettleRequest): Promise<AdmitReply | SettleReply> {
    const p = this.#prepare(op, body);
    if ('reply' in p) return p.reply;
    const { fn, keys, args } = p.call;
    return p.answer(await this.o.redis.fcall(fn, keys.length, ...keys, ...args));
  }

  async #batch(batch: Batch): Promise<Array<AdmitReply | SettleReply>> {
    const prepared = batch.items.map((i) => this.#prepare(i.op, i.body));
    const pipeline = this.o.redis.pipeline();
    for (const p of prepared) {
      if ('call' in p)
        pipeline.fcall(p.call.fn, p.call.keys.length, ...p.call.keys, ...p.call.args);
    }
    const results = (await pipeline.exec()) ?? [];
    let next = 0;
    return prepared.map((p) => {
      if ('reply' in p) return p.reply;
      const [err, result] = results[next++] ?? [new Error('no result')];
      if (err) throw err;
      return p.answer(result);
    });
  }
}
