import type { CompiledConfig } from '@holdfast/config';
import type { HoldfastEvent } from '@holdfast/events';
import { scopesOn, tenantKeys, tenantShare } from './capacity.js';
import type { Keys } from './keys.js';
import type { SlotBatch } from './redis.js';

/** How long capacity.lua keeps a call's capacity record (and a tenant's own window). */
const RECORD_MS = 120_000;

/** What one admission took of an upstream's capacity (capacity.lua's record). */
interface Take {
  upstream: string;
  at: number;
  bucket: number;
  tokens: number;
  /** The shared scopes' windows taken of, then the tenant's own where its share capped it. */
  scopes: string[];
  own: string[];
  counting: 'requested' | 'usage';
}

type Created = Extract<HoldfastEvent, { type: 'reservation.created' }>;
type Closed = Extract<HoldfastEvent, { type: 'reservation.settled' | 'reservation.released' }>;
type Moved = Extract<HoldfastEvent, { type: 'reservation.moved' }>;
type Retried = Extract<HoldfastEvent, { type: 'reservation.retried' }>;

/**
 * The upstream capacity windows (capacity.lua) rebuilt from the calls of the last minute: a
 * `reservation.created` names the upstream its admission took (`upstream`) and took its prompt
 * and granted max_tokens (`requestedMaxTokens`) of each scope the config declares there, in
 * the second of its event (the take ran just before it: its share stays in the window at most
 * a second longer than live). A settle settles it to its usage where the scope counts usage, a
 * release gives it back, as capacity.lua does while its record lives (2 minutes). A call moved
 * to a fallback upstream (`capacity.move`) has its `reservation.moved`: the take it left is
 * closed so (settled to `fromUsedTokens`, its tokens given back and its request kept when `fromAnswered`, else given back) and its `tokens` are taken of the
 * fallback in the move's second, where its close (or, in flight, its record) then is. A
 * release that kept its requests (`answeredRequests`) gives back only the tokens, and a close's
 * `retryRequests` (its retries' requests, capacity.retry) are counted in the close's second on
 * the upstream its take is on then, but those a `reservation.retried` recorded: each of those is
 * counted in its own second on the upstream it names, the call still in flight or not (the
 * close's count is every retry; one no event recorded is one lost between its take and its
 * event, or an older authority's). Not in any event: a provider's 429 or remaining tokens
 * (`capacity.report`) and the counting endpoint's window (`countsPerMinute`).
 *
 * The takes are kept as capacity.lua keeps them, one record per upstream and call: a move that
 * finds the call's record on the fallback still live took nothing there (a retried or doubled
 * move, or one onto the upstream the call holds), and a take a move did not close (one that
 * names no `fromUpstream`: an older producer) stays with its record until it expires.
 */
export class CapacityReplay {
  readonly #keys: Keys;
  readonly #config: CompiledConfig;
  /** By capacity record key (upstream and reservation), as capacity.lua keeps them. */
  readonly #takes = new Map<string, Take>();
  /** The record a call's close closes: its last take's (none after a move to an undeclared). */
  readonly #current = new Map<string, string>();
  /** By window key: second -> [tokens, requests]. */
  readonly #windows = new Map<string, Map<number, [number, number]>>();
  /** A window by key: when a take or close last changed it (its TTL, as capacity.lua's). */
  readonly #touched = new Map<string, number>();
  /** By reservation: the retries its `reservation.retried` events counted (its close's share). */
  readonly #retried = new Map<string, number>();

  constructor(keys: Keys, config: CompiledConfig) {
    this.#keys = keys;
    this.#config = config;
  }

  created(e: Created): void {
    if (!e.upstream) return;
    this.#take(e, e.upstream, Date.parse(e.time), e.promptTokens + e.requestedMaxTokens);
  }

  /**
   * A call moved to a fallback: its take of the upstream it left closed as a close closes it
   * (settled to what attempts there billed, else given back), after its tokens are taken of
   * the fallback in the second of the move, where its close then settles them.
   */
  moved(e: Moved): void {
    const at = Date.parse(e.time);
    this.#current.delete(e.reservationId);
    this.#take(e, e.upstream, at, e.tokens);
    if (!e.fromUpstream || e.fromUpstream === e.upstream) return;
    const key = this.#keys.capacityRecord(e.fromUpstream, e.reservationId);
    const left = this.#takes.get(key);
    if (!left) return;
    this.#takes.delete(key);
    this.#close(left, at, e.fromUsedTokens ?? (e.fromAnswered ? 'answered' : undefined));
  }

  /**
   * A retry's request (capacity.retry), taken of the scopes of the upstream it names in its
   * second, and of the team's own windows where its share caps it, as takeRetry takes it: no
   * tokens, no record, never closed.
   */
  retried(e: Retried): void {
    this.#retried.set(e.reservationId, (this.#retried.get(e.reservationId) ?? 0) + 1);
    const upstream = this.#config.upstreams.get(e.upstream);
    const model = this.#config.models.get(e.model);
    const tenant = this.#config.tenants.get(e.tenant);
    const s = upstream && model && tenant && scopesOn(this.#keys, upstream, model);
    if (!s) return;
    const at = Date.parse(e.time);
    const capped = tenantShare(this.#config, tenant) < 1;
    this.#bill(
      {
        upstream: s.upstream,
        at,
        bucket: Math.floor(at / 1000),
        tokens: 0,
        scopes: s.keys,
        own: capped ? tenantKeys(this.#keys, s, e.tenant) : [],
        counting: s.counting,
      },
      0,
      1,
      at,
    );
  }

  closed(e: Closed): void {
    const key = this.#current.get(e.reservationId);
    this.#current.delete(e.reservationId);
    // Its retries no `reservation.retried` recorded (every one, from an older authority).
    const recorded = this.#retried.get(e.reservationId) ?? 0;
    this.#retried.delete(e.reservationId);
    const unrecorded = (e.retryRequests ?? 0) - recorded;
    const take = key === undefined ? undefined : this.#takes.get(key);
    if (!take || key === undefined) return;
    this.#takes.delete(key);
    const at = Date.parse(e.time);
    const answered = e.type === 'reservation.released' ? e.answeredRequests : undefined;
    this.#close(
      take,
      at,
      e.type === 'reservation.settled' ? e.billedTokens : answered && 'answered',
      answered,
    );
    // Its retries' requests (capacity.retry) no event recorded, each taken in its own second
    // before the close: counted in the close's (they leave the window no sooner than live),
    // kept whatever the record, as capacity.lua keeps them.
    if (unrecorded > 0) this.#bill(take, 0, unrecorded, at, Math.floor(at / 1000));
  }

  /**
   * What the call's admission (or move) took of `upstreamId`'s scopes, at `at`; nothing where
   * its record there is still kept (capacity.lua: taken already).
   */
  #take(e: Created | Moved, upstreamId: string, at: number, tokens: number): void {
    const upstream = this.#config.upstreams.get(upstreamId);
    const model = this.#config.models.get(e.model);
    const s = upstream && model && scopesOn(this.#keys, upstream, model);
    if (!s) return;
    const key = this.#keys.capacityRecord(s.upstream, e.reservationId);
    this.#current.set(e.reservationId, key);
    const kept = this.#takes.get(key);
    if (kept && at - kept.at < RECORD_MS) return;
    const tenant = this.#config.tenants.get(e.tenant);
    const capped = tenant !== undefined && tenantShare(this.#config, tenant) < 1;
    const take: Take = {
      upstream: s.upstream,
      at,
      bucket: Math.floor(at / 1000),
      tokens,
      scopes: s.keys,
      own: capped ? tenantKeys(this.#keys, s, e.tenant) : [],
      counting: s.counting,
    };
    this.#bill(take, take.tokens, 1, at);
    this.#takes.set(key, take);
  }

  /**
   * A take closed at `at`: settled to `usage` where the scope counts usage; `answered`, its
   * tokens given back and its request kept (`requests` of them: the release's
   * `answeredRequests`); else given back.
   */
  #close(take: Take, at: number, usage: number | 'answered' | undefined, requests = 1): void {
    // Its record had expired: capacity.lua answers `unknown` and changes nothing.
    if (at - take.at >= RECORD_MS) return;
    if (usage === 'answered') this.#bill(take, -take.tokens, requests - 1, at);
    else if (usage === undefined) this.#bill(take, -take.tokens, -1, at);
    else if (take.counting === 'usage') this.#bill(take, usage - take.tokens, 0, at);
  }

  #bill(take: Take, tokens: number, requests: number, at: number, bucket = take.bucket): void {
    for (const key of [...take.scopes, ...take.own]) {
      const buckets = this.#windows.get(key) ?? new Map<number, [number, number]>();
      this.#windows.set(key, buckets);
      const [t, r] = buckets.get(bucket) ?? [0, 0];
      buckets.set(bucket, [t + tokens, r + requests]);
      this.#touched.set(key, at);
    }
  }

  /** The windows' buckets still in the minute at `now`, and the records still kept. */
  write(multi: SlotBatch, now: number): void {
    const oldest = Math.floor(now / 1000) - 59;
    for (const [key, buckets] of this.#windows) {
      const fields: Record<string, string> = { lo: String(oldest) };
      let st = 0;
      let sr = 0;
      for (const [bucket, [t, r]] of buckets) {
        if (bucket < oldest || (t === 0 && r === 0)) continue;
        fields[`t${bucket}`] = String(t);
        fields[`r${bucket}`] = String(r);
        st += t;
        sr += r;
      }
      if (Object.keys(fields).length === 1) continue;
      Object.assign(fields, { st: String(st), sr: String(sr) });
      multi.add(key, (p) => p.hset(key, fields));
      const touched = this.#touched.get(key);
      if (touched !== undefined) {
        multi.add(key, (p) => p.pexpire(key, Math.max(1, touched + RECORD_MS - now)));
      }
    }
    for (const [key, take] of this.#takes) {
      const ttl = take.at + RECORD_MS - now;
      if (ttl <= 0) continue;
      const record = {
        bucket: String(take.bucket),
        tokens: String(take.tokens),
        scopes: take.scopes.join('\n'),
        cu: take.counting === 'usage' ? '1' : '0',
        ...(take.own.length > 0 ? { tenant: '1' } : {}),
      };
      multi.add(key, (p) => p.hset(key, record).pexpire(key, ttl));
    }
  }
}
