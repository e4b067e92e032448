import {
  eventSubject,
  parseEvent,
  windowBounds,
  windowCharge,
  type BudgetWindow,
  type HoldfastEvent,
  type NatsNames,
  type WindowState,
} from '@holdfast/events';
import {
  holdInputPrice,
  holdOutputPrice,
  type CompiledConfig,
  type ModelPrices,
  longContextPrices,
  tierPrices,
} from '@holdfast/config';
import { AuthorityClient, type Logger } from '@holdfast/runtime';
import {
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { keysBySlot, scanAll, SlotBatch, type RedisClient } from './redis.js';
import { decodeOutboxEntry } from './outbox.js';
import { summariseRefusals } from './expiry-sweeper.js';
import { END_USER_KEEP_MS, KEEP_CLOSED_MS } from './script-args.js';
import { recordLongContext, recordTiers } from './handlers/admit.js';
import { CapacityReplay } from './rebuild-capacity.js';
import type { Keys } from './keys.js';

/**
 * Rebuilds the authority's Redis state from the event stream (docs/events.md: "Redis state can
 * be rebuilt by replaying the stream"). Every event that moved a window says by how much and
 * when (`charged*` at `time`, or a window's own `charged` where a close charged it another
 * amount), every hold says what it held, so replaying them in order gives
 * back each window's buckets, the holds of calls still in flight, lifetime totals, suspensions,
 * the adaptive samples and the upstream capacity windows of the last minute
 * (rebuild-capacity.ts, which says what of them no event carries). What is not rebuilt: records of reservations already closed (a late
 * duplicate settle of one answers `unknown` instead of `already_settled`; either way nothing
 * changes), and the possible overrun of an adaptive call that cannot grow admitted before its
 * event carried it (`potentialTokens`; such a hold is rebuilt without it).
 */

export interface RebuildOptions {
  redis: RedisClient;
  nc: NatsConnection;
  names: NatsNames;
  keys: Keys;
  config: CompiledConfig;
  logger: Logger;
  /** The instant the windows are rebuilt for (epoch ms); buckets older than a window drop. */
  now?: number;
}

export interface RebuildSummary {
  events: number;
  windows: number;
  liveHolds: number;
  tenants: number;
}

/**
 * Whose window: the tenant's own, or one of its keys' or end users' (`subject`), in the org
 * whose slot it lives in (the event's: a team moved to another org keeps its past there).
 */
interface Owner {
  org: string;
  tenant: string;
  scope?: 'key' | 'end_user' | undefined;
  subject?: string | undefined;
}

interface WindowAcc extends Owner {
  budget: string;
  window: BudgetWindow;
  unit: 'tokens' | 'usd';
  buckets: Map<number, number>;
  held: number;
  /** What adaptive calls in flight whose holds cannot grow could still overrun (`p`). */
  potential: number;
  /**
   * A month window of a budget the config no longer has (whether it was a calendar month is
   * not in the config any more): its charges also by calendar month, and which of the two the
   * `used` of its events agreed with.
   */
  removed?: { months: Map<number, number>; sliding: boolean; calendar: boolean };
}

interface LiveHold {
  created: Extract<HoldfastEvent, { type: 'reservation.created' }>;
  /** The levels it was admitted on, in its org (the record's `levels`). */
  levels: string[];
  heldT: number;
  heldU: number;
  covered: number;
  windows: (Owner & { budget: string; unit: 'tokens' | 'usd' })[];
  /** Levels its team moved under while it was held, adopted (`#adopt`): not its `levels`. */
  moved?: string[];
  /** Its admission tracked its end user (admit.lua's `nu`): a close leaving it nothing forgets it. */
  tracked?: boolean;
  /** Its last capacity.move (move.lua's `up`, `mf`): the upstream it is on, the one it left. */
  on?: { up: string; from: string };
  /** The retries its `reservation.retried` events recorded (retry.lua's `rq`). */
  retries?: number;
}

/** An event that charges windows (what `#bill` reads of it). */
type Charging = Pick<
  Extract<HoldfastEvent, { type: 'reservation.created' }>,
  'time' | 'chargedTokens' | 'chargedMicroUsd'
>;
type Closed = Extract<
  HoldfastEvent,
  { type: 'reservation.settled' | 'reservation.released' | 'reservation.expired' }
>;

const WINDOW_CODE = { minute: 'm', day: 'd', month: 'M' } as const;
const UNIT_CODE = { tokens: 't', usd: 'u' } as const;

/**
 * Keys under the prefix that hold budget state: everything but the config, the orgs and the
 * response owners (no event records those, so a rebuild keeps them).
 */
export async function stateKeys(redis: RedisClient, keys: Keys): Promise<string[]> {
  return (await scanAll(redis, `${keys.prefix}:{*`)).filter(
    (k) => !keys.isGlobal(k) && !keys.isResponseOwner(k),
  );
}

/**
 * `rebuild --force`: deletes the budget state under the prefix (never the config or the
 * response owners), once what the outboxes still hold is on the events stream. Those events
 * (JetStream was away, or the authorities stopped before their relay caught up) are on no
 * stream yet: deleted, their usage would be lost to ClickHouse and to the rebuild. They are
 * published as the relay does (`Nats-Msg-Id` = event id: one already relayed is dropped as a
 * duplicate, or skipped by the rebuild); an entry that does not decode stops it, deleting
 * nothing (an authority's relay parks it as a dead letter). The refusals counted past a
 * tenant's event rate and not summarised yet are written to the outboxes first, as the
 * sweeper writes them, so they are relayed too (only ClickHouse reads them: they change no
 * budget state).
 */
export async function clearState(o: {
  redis: RedisClient;
  keys: Keys;
  js: JetStreamClient;
  names: NatsNames;
  config: CompiledConfig;
  logger: Logger;
}): Promise<{ relayed: number; deleted: number }> {
  // Refusals counted past the event rate and not summarised yet (the sweeper writes them about
  // a second later): written to their outboxes first, so they are relayed below.
  let summaries = 0;
  for (const key of (await stateKeys(o.redis, o.keys)).filter((k) => k.endsWith(':refusals'))) {
    const org = key.slice(o.keys.prefix.length + 2, key.lastIndexOf('}'));
    summaries += await summariseRefusals(o.redis, o.keys, org, (await o.redis.hlen(key)) / 2);
  }
  if (summaries > 0) o.logger.warn({ summaries }, 'summarised the refusals not evented yet');
  const existing = await stateKeys(o.redis, o.keys);
  let relayed = 0;
  for (const key of existing.filter((k) => k.endsWith(':outbox'))) {
    for (const [id, fields] of await o.redis.xrange(key, '-', '+')) {
      let event;
      try {
        event = decodeOutboxEntry(fields, o.config);
      } catch (err) {
        throw new Error(
          `${key} entry ${id} does not decode (${String(err)}): start an authority to relay it (it parks it as a dead letter), then rebuild`,
        );
      }
      await o.js.publish(eventSubject(o.names, event.tenant, event.type), JSON.stringify(event), {
        msgID: event.id,
      });
      relayed++;
    }
  }
  if (relayed > 0) o.logger.warn({ relayed }, 'relayed the events the outboxes still held');
  for (const group of keysBySlot(o.redis, existing)) await o.redis.del(...group);
  return { relayed, deleted: existing.length };
}

/** Where a hold sits, from a window of an event of `org`. */
function holdWindow(org: string, w: WindowState): LiveHold['windows'][number] {
  return {
    org,
    tenant: w.tenant,
    ...(w.scope ? { scope: w.scope, subject: w.subject } : {}),
    budget: w.budget,
    unit: w.unit,
  };
}

const NO_PRICES: ModelPrices = {
  input: 0,
  output: 0,
  cachedInput: 0,
  cacheWrite5m: 0,
  cacheWrite1h: 0,
  audioInput: 0,
  audioOutput: 0,
};

/** A hold's base prices, the tier it was held at and the prices it holds at (its event's). */
function heldPrices(config: CompiledConfig, c: LiveHold['created']) {
  const model = config.models.get(c.model);
  const price = model?.pricePico ?? NO_PRICES;
  // The hold grows at the prices of the tier it was held at (its event says which).
  const heldTier = c.serviceTier ?? 'default';
  // Held long when its event says so (the same rule as admit, on its prompt count).
  const long =
    c.longContext && model ? longContextPrices(model, heldTier, c.promptTokens) : undefined;
  const held = long ?? (model && tierPrices(model, heldTier)) ?? price;
  return { price, heldTier, held };
}

export class Rebuilder {
  readonly #o: RebuildOptions;
  readonly #windows = new Map<string, WindowAcc>();
  readonly #live = new Map<string, LiveHold>();
  /** By state key (a level in an org). */
  readonly #billed = new Map<string, { t: number; u: number }>();
  /** Who holds each suspension, by state key (empty: not suspended). */
  readonly #suspended = new Map<string, Set<'alerter' | 'admin'>>();
  /** By state key. */
  readonly #overruns = new Map<string, { n: number; t: number; u: number; at: number }>();
  readonly #samples = new Map<string, number[]>();
  /**
   * The ids of the events replayed: the stream can hold one twice (a relay killed between
   * JetStream's ack and its XDEL republishes after the 10-minute duplicate window, a Redis
   * restored from a snapshot republishes what it had relayed), and the live state, like
   * ClickHouse, counted it once.
   */
  readonly #ids = new Set<string>();
  /** End users with budgets by registry key: end user -> last seen (ms). */
  readonly #endUsers = new Map<string, Map<string, number>>();
  /** The registries among them that are a key's (maxEndUsers), which expire. */
  readonly #keyRegistries = new Set<string>();
  /** The upstreams' capacity windows (rebuild-capacity.ts). */
  readonly #capacity: CapacityReplay;

  constructor(opts: RebuildOptions) {
    this.#o = opts;
    this.#capacity = new CapacityReplay(opts.keys, opts.config);
  }

  /**
   * Replays the whole stream and writes the state. Redis must hold no state under the prefix,
   * and no authority may serve on its names: one that does writes on the emptied Redis after
   * the check below, the rebuild's writes land over its own, and the replay misses the
   * events it writes meanwhile.
   */
  async run(): Promise<RebuildSummary> {
    const { nc, names } = this.#o;
    const probe = await new AuthorityClient({ nc, names, timeoutMs: 2_000 }).configGet();
    if (probe.ok || probe.error.code !== 'no_responders') {
      throw new Error(
        `an authority answers on ${names.authorityPrefix}: stop every authority before a rebuild (their writes would mix with the rebuilt state)`,
      );
    }
    const existing = await stateKeys(this.#o.redis, this.#o.keys);
    if (existing.length > 0) {
      throw new Error(
        `Redis already holds ${existing.length} state keys under ${this.#o.keys.prefix}; rebuild refuses to mix (use --force to delete them first)`,
      );
    }
    const events = await this.#replay();
    await this.#write();
    return {
      events,
      windows: this.#windows.size,
      liveHolds: this.#live.size,
      tenants: this.#billed.size,
    };
  }

  async #replay(): Promise<number> {
    const { nc, names, logger } = this.#o;
    const jsm = await jetstreamManager(nc);
    const total = (await jsm.streams.info(names.eventsStream)).state.last_seq;
    if (total === 0) return 0;
    const consumer = await jetstream(nc).consumers.get(names.eventsStream, {
      deliver_policy: DeliverPolicy.All,
    });
    let seen = 0;
    let duplicates = 0;
    let last = 0;
    while (last < total) {
      // Ask for exactly what is left, so the last batch does not wait out its expiry.
      const batch = await consumer.fetch({
        max_messages: Math.min(1_000, total - last),
        expires: 5_000,
      });
      let got = 0;
      for await (const m of batch) {
        got++;
        last = m.seq;
        const parsed = parseEvent(m.data);
        if (!parsed.ok) {
          logger.warn(
            { seq: m.seq, error: parsed.error.message },
            'event skipped: it does not validate',
          );
          continue;
        }
        if (this.#ids.has(parsed.value.id)) {
          duplicates++;
          continue;
        }
        this.#ids.add(parsed.value.id);
        this.#apply(parsed.value);
        seen++;
      }
      if (got === 0) break;
    }
    if (duplicates > 0) logger.warn({ duplicates }, 'events the stream holds twice replayed once');
    return seen;
  }

  #windowKey(w: Owner & { budget: string }): string {
    const { keys } = this.#o;
    const { org } = w;
    if (w.scope === 'key') return keys.keyWindow(org, w.tenant, w.subject ?? '', w.budget);
    if (w.scope === 'end_user') return keys.userWindow(org, w.tenant, w.subject ?? '', w.budget);
    return keys.window(org, w.tenant, w.budget);
  }

  #window(w: Owner & Pick<WindowState, 'budget' | 'window' | 'unit'>): WindowAcc {
    const key = this.#windowKey(w);
    let acc = this.#windows.get(key);
    if (!acc) {
      acc = {
        org: w.org,
        tenant: w.tenant,
        ...(w.scope ? { scope: w.scope, subject: w.subject } : {}),
        budget: w.budget,
        window: w.window,
        unit: w.unit,
        buckets: new Map(),
        held: 0,
        potential: 0,
      };
      if (w.window === 'month' && this.#calendar(w) === undefined)
        acc.removed = { months: new Map(), sliding: true, calendar: true };
      this.#windows.set(key, acc);
    }
    return acc;
  }

  /**
   * A call's end user, last seen now (admitted on end-user budgets: admit.lua registers it),
   * in the tenant's registry of the event's org and in its key's where the key has a
   * maxEndUsers (as admit.lua keeps them).
   */
  #seen(e: Extract<HoldfastEvent, { type: 'reservation.created' }>): void {
    if (!e.endUser || !e.windows.some((w) => w.scope === 'end_user')) return;
    this.#registered(e, e.endUser);
  }

  /** Whether the call's admission adds its end user to its tenant's registry (admit.lua's `nu`). */
  #tracks(e: Extract<HoldfastEvent, { type: 'reservation.created' }>): boolean {
    if (!e.endUser || !e.windows.some((w) => w.scope === 'end_user')) return false;
    return !this.#endUsers.get(this.#o.keys.users(e.org, e.tenant))?.has(e.endUser);
  }

  /**
   * As close.lua: the close of a call that tracked its end user, leaving it nothing billed,
   * held or possible in any window, forgets it (its registries and its windows).
   */
  #forgetIfUnused(e: Closed): void {
    if (!e.endUser) return;
    const mine = e.windows.filter((w) => w.scope === 'end_user');
    const keys = mine.map((w) => this.#windowKey({ ...w, org: e.org }));
    const unused = mine.every((w, i) => {
      const acc = this.#windows.get(keys[i]!);
      return w.used === 0 && w.held === 0 && (acc?.potential ?? 0) === 0;
    });
    if (mine.length === 0 || !unused) return;
    this.#endUsers.get(this.#o.keys.users(e.org, e.tenant))?.delete(e.endUser);
    if (e.keyId)
      this.#endUsers.get(this.#o.keys.keyUsers(e.org, e.tenant, e.keyId))?.delete(e.endUser);
    for (const key of keys) this.#windows.delete(key);
  }

  /** `endUser` of call `c` seen at its admission, in the registries #seen says. */
  #registered(
    c: { org: string; tenant: string; keyId: string | null; time: string },
    endUser: string,
  ): void {
    const registries = [this.#o.keys.users(c.org, c.tenant)];
    if (c.keyId && this.#o.config.tenants.get(c.tenant)?.keyMaxEndUsers.has(c.keyId)) {
      const mine = this.#o.keys.keyUsers(c.org, c.tenant, c.keyId);
      this.#keyRegistries.add(mine);
      registries.push(mine);
    }
    for (const key of registries) this.#register(key, endUser, c);
  }

  /** An end user in a registry, last seen at `e.time` at the latest. */
  #register(key: string, endUser: string, e: { time: string }): void {
    const seen = this.#endUsers.get(key) ?? new Map<string, number>();
    this.#endUsers.set(key, seen);
    seen.set(endUser, Math.max(seen.get(endUser) ?? 0, Date.parse(e.time)));
  }

  /**
   * The levels an event of `e.org` was admitted on: the tenant's chain when it still lives in
   * that org and has every level its windows name, else (moved to another org or under another
   * parent since) its tenant and the levels its windows name, up to the org (a level without
   * budgets between them is not named by any event).
   */
  #levels(e: { tenant: string; org: string; windows: readonly WindowState[] }): string[] {
    const t = this.#o.config.tenants.get(e.tenant);
    if (t?.org === e.org && e.windows.every((w) => t.chain.includes(w.tenant))) return t.chain;
    const named = e.windows.map((w) => w.tenant).filter((x) => x !== e.tenant && x !== e.org);
    return [...new Set([e.tenant, ...named, e.org])];
  }

  /** Whether the config has the window's budget as a calendar month (undefined: no budget). */
  #calendar(w: Owner & { budget: string }): boolean | undefined {
    const t = this.#o.config.tenants.get(w.tenant);
    const list =
      w.scope === 'key'
        ? t?.keyBudgets.get(w.subject ?? '')
        : w.scope === 'end_user'
          ? t?.endUserBudgets
          : t?.budgets;
    return list?.find((b) => b.id === w.budget)?.calendar;
  }

  /**
   * Whether a window is a calendar month: as the config says, or for a month budget it no
   * longer has, as its events' `used` says. When both agreed with every event (its whole life
   * in one calendar month) it is rebuilt as a calendar month while that month is the current
   * one (added back as a sliding month, its spend then counts from now, never for less time
   * than live) and as a sliding one after (a calendar month would have dropped it).
   */
  #isCalendar(acc: WindowAcc, now: number): boolean {
    const r = acc.removed;
    if (!r) return this.#calendar(acc) ?? false;
    if (r.calendar !== r.sliding) return r.calendar;
    const current = windowBounds('month', now, true).currentBucket;
    return r.calendar && [...r.months.keys()].every((m) => m === current);
  }

  /**
   * Checks each of a removed month budget's models against the `used` an event reports for
   * its window (what the live window held just after it, slid to the event's time).
   */
  #observe(e: { time: string }, windows: readonly (WindowState & Owner)[]): void {
    const ms = Date.parse(e.time);
    for (const w of windows) {
      const r = this.#windows.get(this.#windowKey(w))?.removed;
      if (!r || !(r.calendar && r.sliding)) continue;
      const acc = this.#windows.get(this.#windowKey(w))!;
      const { startBucket, currentBucket } = windowBounds('month', ms);
      let sliding = 0;
      for (const [b, amount] of acc.buckets)
        if (b >= startBucket && b <= currentBucket) sliding += amount;
      const month = windowBounds('month', ms, true).currentBucket;
      r.sliding = sliding === w.used;
      r.calendar = (r.months.get(month) ?? 0) === w.used;
    }
  }

  /**
   * Adds what an event charged at its `time` to the windows it lists: `chargedTokens` /
   * `chargedMicroUsd`, or a window's own `charged` where the event says it got another amount.
   */
  #bill(e: Charging, windows: readonly (WindowState & Owner)[]): void {
    const ms = Date.parse(e.time);
    for (const w of windows) {
      const amount = windowCharge(e, w);
      if (amount === 0) continue;
      const acc = this.#window(w);
      const bucket = windowBounds(w.window, ms, this.#calendar(w)).currentBucket;
      acc.buckets.set(bucket, (acc.buckets.get(bucket) ?? 0) + amount);
      const months = acc.removed?.months;
      if (months) {
        const month = windowBounds('month', ms, true).currentBucket;
        months.set(month, (months.get(month) ?? 0) + amount);
      }
    }
  }

  /**
   * The windows a close charged that its event does not list: those its hold was on and the
   * tenant's plan no longer has (a budget removed mid-call), in an event from before closes
   * listed them (`removed`; none is unlisted since). close.lua gives the hold back there and
   * bills them the event's charge, in the org the hold was admitted in.
   */
  #unlisted(e: Closed, live: LiveHold | undefined): (WindowState & Owner)[] {
    if (!live) return [];
    const listed = new Set(e.windows.map((w) => this.#windowKey({ ...w, org: e.org })));
    return live.windows
      .filter((w) => !listed.has(this.#windowKey(w)))
      .map((w) => ({
        ...w,
        window: w.budget.split('-')[0] as BudgetWindow,
        limit: 0,
        used: 0,
        held: 0,
        enforce: false,
      }));
  }

  /** Holds (or gives back, negative) t tokens / u micro-USD on windows, or their `potential`. */
  #hold(
    windows: LiveHold['windows'],
    t: number,
    u: number,
    field: 'held' | 'potential' = 'held',
  ): void {
    if (t === 0 && u === 0) return;
    for (const w of windows) {
      const acc = this.#window({
        ...w,
        window: w.budget.split('-')[0] as BudgetWindow,
        unit: w.unit,
      });
      acc[field] = Math.max(0, acc[field] + (w.unit === 'usd' ? u : t));
    }
  }

  /** Lifetime totals of the levels (in `org`) an event billed. */
  #lifetime(org: string, levels: readonly string[], t: number, u: number): void {
    if (t === 0 && u === 0) return;
    for (const level of levels) {
      const key = this.#o.keys.state(org, level);
      const b = this.#billed.get(key) ?? { t: 0, u: 0 };
      this.#billed.set(key, { t: b.t + t, u: b.u + u });
    }
  }

  #apply(e: HoldfastEvent): void {
    switch (e.type) {
      case 'reservation.created': {
        const windows = e.windows.map((w) => holdWindow(e.org, w));
        const levels = this.#levels(e);
        const tracked = this.#tracks(e);
        this.#seen(e);
        const listed = e.windows.map((w) => ({ ...w, org: e.org }));
        this.#hold(windows, e.heldTokens, e.heldMicroUsd);
        this.#hold(windows, e.potentialTokens ?? 0, e.potentialMicroUsd ?? 0, 'potential');
        this.#bill(e, listed);
        this.#observe(e, listed);
        this.#lifetime(e.org, levels, e.chargedTokens, e.chargedMicroUsd);
        this.#capacity.created(e);
        const covered = e.heldTokens > 0 ? Math.max(0, e.heldTokens - e.promptTokens) : e.maxTokens;
        this.#live.set(e.reservationId, {
          created: e,
          levels,
          heldT: e.heldTokens,
          heldU: e.heldMicroUsd,
          covered,
          windows,
          ...(tracked ? { tracked } : {}),
        });
        return;
      }
      case 'reservation.extended': {
        const live = this.#live.get(e.reservationId);
        if (!live) return;
        this.#hold(live.windows, e.addedTokens, e.addedMicroUsd);
        this.#observe(
          e,
          e.windows.map((w) => ({ ...w, org: e.org })),
        );
        Object.assign(live, {
          heldT: e.heldTokens,
          heldU: e.heldMicroUsd,
          covered: e.coveredOutputTokens,
        });
        return;
      }
      case 'reservation.settled':
      case 'reservation.released':
      case 'reservation.expired': {
        const live = this.#live.get(e.reservationId);
        const windows = live?.windows ?? e.windows.map((w) => holdWindow(e.org, w));
        this.#hold(windows, -e.heldTokens, -e.heldMicroUsd);
        const pot = live?.created;
        this.#hold(
          windows,
          -(pot?.potentialTokens ?? 0),
          -(pot?.potentialMicroUsd ?? 0),
          'potential',
        );
        this.#live.delete(e.reservationId);
        const listed = e.windows.map((w) => ({ ...w, org: e.org }));
        this.#bill(e, listed);
        this.#bill(e, this.#unlisted(e, live));
        this.#observe(e, listed);
        this.#lifetime(e.org, live?.levels ?? this.#levels(e), e.chargedTokens, e.chargedMicroUsd);
        if (live?.tracked) this.#forgetIfUnused(e);
        if (e.type !== 'reservation.expired') this.#capacity.closed(e);
        if (
          e.type === 'reservation.settled' &&
          this.#o.config.tenants.get(e.tenant)?.mode === 'adaptive'
        ) {
          const key = this.#o.keys.samples(e.org, e.tenant, e.useCase, e.model);
          const list = this.#samples.get(key) ?? [];
          list.unshift(e.completionTokens);
          list.length = Math.min(
            list.length,
            this.#o.config.tenants.get(e.tenant)!.adaptive.samples,
          );
          this.#samples.set(key, list);
        }
        return;
      }
      case 'reservation.moved': {
        this.#capacity.moved(e);
        const live = this.#live.get(e.reservationId);
        if (live) live.on = { up: e.upstream, from: e.fromUpstream ?? '' };
        return;
      }
      case 'reservation.retried': {
        this.#capacity.retried(e);
        const live = this.#live.get(e.reservationId);
        if (live) live.retries = (live.retries ?? 0) + 1;
        return;
      }
      case 'reservation.overrun': {
        const st = this.#o.keys.state(e.org, e.tenant);
        const o = this.#overruns.get(st) ?? { n: 0, t: 0, u: 0, at: 0 };
        this.#overruns.set(st, {
          n: o.n + 1,
          t: o.t + e.overrunTokens,
          u: o.u + e.overrunMicroUsd,
          at: Date.parse(e.time),
        });
        return;
      }
      case 'tenant.suspended': {
        const st = this.#o.keys.state(e.org, e.tenant);
        const owners = this.#suspended.get(st) ?? new Set();
        owners.add(e.by);
        this.#suspended.set(st, owners);
        return;
      }
      case 'tenant.resumed':
        // Emitted only once no owner holds the suspension any more.
        this.#suspended.set(this.#o.keys.state(e.org, e.tenant), new Set());
        return;
      default:
        return;
    }
  }

  /**
   * The calls in flight adopted into the plan as admit.lua adopts them (its `adopt` and
   * `adoptOwn`): a hold not on a window of its levels' budgets, its key's or its end user's
   * is held there too, and one admitted in post or
   * estimate mode under a tenant of its levels that now holds (reserve, adaptive) is held at
   * its worst case on every window it is on. Live, the first admission after the change
   * does it; rebuilt, at once (a hold never smaller than live's).
   */
  #adopt(): void {
    const { config } = this.#o;
    for (const live of this.#live.values()) {
      const c = live.created;
      const chain = live.levels.map((level) => config.tenants.get(level));
      if (
        live.heldT === 0 &&
        live.heldU === 0 &&
        (c.mode === 'post' || c.mode === 'estimate') &&
        chain.some((t) => t?.org === c.org && (t.mode === 'reserve' || t.mode === 'adaptive'))
      ) {
        const { held } = heldPrices(config, c);
        const pico =
          c.promptTokens * holdInputPrice(held) + c.maxTokens * holdOutputPrice(held, true);
        const whole = Math.ceil(pico / 1_000_000) + (c.toolFeeBoundMicroUsd ?? 0);
        if (c.mode === 'post') {
          live.heldT = c.promptTokens + c.maxTokens;
          live.heldU = whole;
        } else {
          live.heldT = c.maxTokens;
          live.heldU = Math.max(0, whole - c.chargedMicroUsd);
        }
        this.#hold(live.windows, live.heldT, live.heldU);
      }
      const on = new Set(live.windows.map((w) => this.#windowKey(w)));
      const added: LiveHold['windows'] = [];
      live.levels.forEach((level, i) => {
        if (chain[i]?.org !== c.org) return;
        for (const b of chain[i].budgets) {
          if (b.tenant !== level || b.scope !== 'tenant') continue;
          const w = { org: c.org, tenant: level, budget: b.id, unit: b.unit };
          if (!on.has(this.#windowKey(w))) added.push(w);
        }
      });
      // The levels its team moved under since (the leaf's walk in admit.lua's adopt): held
      // there too, named by '@' codes, in their in-flight sets.
      const own = chain[0]?.org === c.org ? chain[0] : undefined;
      for (const level of own?.chain ?? []) {
        if (live.levels.includes(level)) continue;
        for (const b of config.tenants.get(level)?.budgets ?? []) {
          if (b.tenant !== level || b.scope !== 'tenant') continue;
          const w = { org: c.org, tenant: level, budget: b.id, unit: b.unit };
          if (!on.has(this.#windowKey(w))) added.push(w);
        }
        live.moved = [...(live.moved ?? []), level];
      }
      // Its key's budgets and its end user's (its tenant's, the leaf), as admit.lua's adoptOwn.
      const subjects = [
        { scope: 'key' as const, subject: c.keyId, budgets: own?.keyBudgets.get(c.keyId ?? '') },
        { scope: 'end_user' as const, subject: c.endUser, budgets: own?.endUserBudgets },
      ];
      for (const { scope, subject, budgets } of subjects) {
        if (!subject) continue;
        for (const b of budgets ?? []) {
          const w = { org: c.org, tenant: c.tenant, scope, subject, budget: b.id, unit: b.unit };
          if (on.has(this.#windowKey(w))) continue;
          added.push(w);
          // An end user adopted is one with budgets, seen at its call's admission, in its
          // tenant's registry and its key's (adoptOwn).
          if (scope === 'end_user') this.#registered(c, subject);
        }
      }
      this.#hold(added, live.heldT, live.heldU);
      live.windows.push(...added);
    }
  }

  async #write(): Promise<void> {
    this.#adopt();
    const { redis, keys, config } = this.#o;
    const now = this.#o.now ?? Date.now();
    const multi = new SlotBatch(redis);
    for (const [key, acc] of this.#windows) {
      const calendar = this.#isCalendar(acc, now);
      const { startBucket } = windowBounds(acc.window, now, calendar);
      const fields: Record<string, string> = {
        h: String(acc.held),
        p: String(acc.potential),
        lo: String(startBucket),
      };
      let sum = 0;
      const buckets = calendar && acc.removed ? acc.removed.months : acc.buckets;
      for (const [bucket, amount] of buckets) {
        if (bucket < startBucket || amount === 0) continue;
        fields[`b${bucket}`] = String(amount);
        sum += amount;
      }
      fields.s = String(sum);
      multi.add(key, (p) => p.hset(key, fields));
      if (acc.scope === 'end_user') {
        // As admit.lua keeps them: the longest window past the end user's last call.
        const seen = this.#endUsers.get(keys.users(acc.org, acc.tenant))?.get(acc.subject ?? '');
        const ttl = Math.max(1, (seen ?? now) + END_USER_KEEP_MS - now);
        multi.add(key, (p) => p.pexpire(key, ttl));
      }
    }
    for (const [key, seen] of this.#endUsers) {
      const live = [...seen].filter(([, at]) => at > now - END_USER_KEEP_MS);
      const members = live.flatMap(([user, at]) => [at, user]);
      if (live.length === 0) continue;
      multi.add(key, (p) => p.zadd(key, ...members));
      // A filter of the registry as it was (admit.lua trackedFilter) would miss those added.
      const filter = `${key}:filter`;
      multi.add(filter, (p) => p.del(filter));
      if (this.#keyRegistries.has(key)) {
        // A key's registry expires the longest window past its last write (admit.lua).
        const last = live.reduce((m, [, at]) => Math.max(m, at), 0);
        multi.add(key, (p) => p.pexpire(key, Math.max(1, last + END_USER_KEEP_MS - now)));
      }
    }
    for (const [st, b] of this.#billed) {
      multi.add(st, (p) => p.hset(st, { billedT: String(b.t), billedU: String(b.u) }));
    }
    for (const [st, owners] of this.#suspended) {
      const fields: Record<string, string> = {
        suspended: owners.size > 0 ? '1' : '0',
        suspendedBy: 'rebuild',
      };
      for (const o of owners) fields[`so:${o}`] = '1';
      multi.add(st, (p) => p.hset(st, fields));
    }
    for (const [st, o] of this.#overruns) {
      multi.add(st, (p) =>
        p.hset(st, {
          overN: String(o.n),
          overT: String(o.t),
          overU: String(o.u),
          overAt: String(o.at),
        }),
      );
    }
    for (const [key, list] of this.#samples)
      multi.add(key, (p) => p.rpush(key, ...list.map(String)));
    for (const [id, live] of this.#live) this.#writeHold(multi, config, id, live);
    this.#capacity.write(multi, now);
    const failed = (await multi.exec()).find(([err]) => err)?.[0];
    if (failed) throw failed;
    // Orgs whose outboxes the relay watches.
    const orgs = [...new Set([...config.tenants.values()].map((t) => t.org))];
    if (orgs.length > 0) await redis.sadd(keys.orgs, ...orgs);
  }

  /** The record admit.lua writes for a hold (see its HSET), and the in-flight set entries. */
  #writeHold(multi: SlotBatch, config: CompiledConfig, id: string, live: LiveHold): void {
    const c = live.created;
    const { org } = c;
    const now = this.#o.now ?? Date.now();
    const chain = live.levels;
    const levelIndex = new Map(chain.map((t, i) => [t, i]));
    const moved = live.moved ?? [];
    const holds = live.windows
      .filter((w) => levelIndex.has(w.tenant) || moved.includes(w.tenant))
      .map((w) => {
        const window = w.budget.split('-')[0] as BudgetWindow;
        const acc = this.#windows.get(this.#windowKey(w));
        const code = acc && this.#isCalendar(acc, now) ? 'C' : WINDOW_CODE[window];
        const level =
          w.scope === 'key'
            ? 'K'
            : w.scope === 'end_user'
              ? 'U'
              : (levelIndex.get(w.tenant) ?? `@${w.tenant}`);
        return `${level}${code}${UNIT_CODE[w.unit]}`;
      });
    const model = config.models.get(c.model);
    const { price, heldTier, held } = heldPrices(config, c);
    const createdAt = Date.parse(c.time);
    const leaseMs = Date.parse(c.expiresAt) - createdAt;
    // An edge renews a running call's lease (a new one from then) once half of it has passed,
    // and no event says so: past a quarter of it (a margin for the edge's clock) the hold may
    // have been renewed, and its admission's expiry may be over although its edge still
    // streams it. It gets a lease from now, the latest a renewal can have given it: never
    // expired before it would have been live (an edge that died is expired a lease later).
    const expiresAt = now - createdAt < leaseMs / 4 ? createdAt + leaseMs : now + leaseMs;
    const tenant = config.tenants.get(c.tenant);
    const { keys } = this.#o;
    const key = keys.reservation(org, id);
    const record: Record<string, string> = {
      state: 'held',
      tenant: c.tenant,
      org,
      // As its tenant had it at admission (the record keeps it); the current one for an event
      // from before the event said.
      expB: (c.onExpiry ?? tenant?.onExpiry) === 'bill' ? '1' : '0',
      keyId: c.keyId ?? '',
      useCase: c.useCase,
      model: c.model,
      mode: c.mode,
      api: c.api,
      prompt: String(c.promptTokens),
      max: String(c.maxTokens),
      heldT: String(live.heldT),
      heldU: String(live.heldU),
      chargedT: String(c.chargedTokens),
      chargedU: String(c.chargedMicroUsd),
      // As admit.lua writes them: the hold's input price, then the settlement's.
      priceIn: String(holdInputPrice(held)),
      priceOut: String(price.output),
      priceCached: String(price.cachedInput),
      priceUn: String(price.input),
      priceW5: String(price.cacheWrite5m),
      priceW1h: String(price.cacheWrite1h),
      priceAIn: String(price.audioInput),
      priceAOut: String(price.audioOutput),
      // The events do not say whether the call asked for audio output: a rebuilt hold grows
      // (extend) at the dearer output price, never below what admit held it at.
      priceHOut: String(holdOutputPrice(held, true)),
      tier: heldTier,
      tiers: model ? recordTiers(model) : '',
      long: model ? recordLongContext(model) : '',
      createdAt: String(createdAt),
      expiresAt: String(expiresAt),
      leaseMs: String(leaseMs),
      levels: chain.join(';'),
      holds: holds.join(';'),
      cov: String(live.covered),
      potT: String(c.potentialTokens ?? 0),
      potU: String(c.potentialMicroUsd ?? 0),
      sampleN: c.mode === 'adaptive' && tenant ? String(tenant.adaptive.samples) : '0',
      endUser: c.endUser ?? '',
      ...(live.tracked ? { nu: '1' } : {}),
      // Where its capacity is (move.lua's `up`): where its last capacity.move put it, else
      // where its admission took it ('': none). Its close closes that capacity.
      ...(live.on ? { up: live.on.up, mf: live.on.from, mr: '1' } : { up: c.upstream ?? '' }),
      ...(live.retries ? { rq: String(live.retries) } : {}),
      // admit.lua's: the tool fees of a call that held nothing (adopt holds them too).
      ...(c.toolFeeBoundMicroUsd && c.heldMicroUsd === 0
        ? { tfH: String(c.toolFeeBoundMicroUsd) }
        : {}),
      // The tool-use fees it was admitted with, which its settle bills uses at (admit.lua's
      // `tf`); an event from before them: none, the model's fees at its close.
      ...(c.toolPrices ? { tf: c.toolPrices } : {}),
    };
    const ttl = Math.max(1, expiresAt - (this.#o.now ?? Date.now())) + KEEP_CLOSED_MS;
    multi.add(key, (p) => p.hset(key, record).pexpire(key, ttl));
    // The chain's root (the org) has the org's lease index as its set (keys.leases).
    for (const k of [...chain, ...moved].map((l) => keys.holds(org, l))) {
      multi.add(k, (p) => p.zadd(k, expiresAt, id));
    }
  }
}
