import { randomUUID } from 'node:crypto';
import { Backoff } from '@holdfast/retry';
import type { CompiledConfig, CompiledTenant } from '@holdfast/config';
import {
  endUserSet,
  mayTrack,
  type EndUserSet,
  type Refused,
  type RefusalsReportRequest,
} from '@holdfast/events';
import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { EdgeMetrics } from '../metrics.js';
import type { AdmissionRequest } from './admission.js';

export interface RefusalMemoryOptions {
  /** How long a budget refusal is remembered at most (EDGE_REFUSAL_MEMORY_MS); 0: never. */
  memoryMs: number;
  /** How often the refusals answered here are reported (EDGE_REFUSAL_REPORT_MS). */
  reportMs: number;
  authority: Pick<AuthorityClient, 'reportRefusals'>;
  /** The applied config: which levels a closing tenant's calls give room back to. */
  config: () => CompiledConfig | undefined;
  metrics: Pick<EdgeMetrics, 'localRefusals'>;
  logger: Pick<Logger, 'warn' | 'info'>;
  /** Most refusals remembered at once (each is a few hundred bytes). */
  maxEntries?: number;
  /** Most of them one org's (its end users or keys cannot take the whole memory). */
  maxPerOrg?: number;
  /**
   * Most bytes of the filters of end users tracked by teams at their maxEndUsers, all teams
   * together (a filter is 2 bytes an end user: 20 KB for the default 10,000).
   */
  maxTrackedBytes?: number;
}

/** A refusal the authority made, remembered for its caller's repeats. */
interface Remembered {
  /** The tenant as compiled when it was refused: a config applied since makes it stale. */
  tenant: CompiledTenant;
  /** The refused call's amounts: a repeat needs no less (a budget), or any (calls in flight). */
  promptTokens: number;
  maxTokens: number;
  anySize: boolean;
  /** The refused call's key and end user: another's answer leaves out their windows. */
  keyId: string | null;
  endUser: string | undefined;
  /** Remembered until (epoch ms). */
  until: number;
  /** When its Retry-After ends (epoch ms); null when waiting cannot help. */
  retryAt: number | null;
  refused: Refused & { summary: NonNullable<Refused['summary']> };
  /** end_user_limit: the end users the team tracks (Refused `trackedFilter`). */
  tracked?: EndUserSet;
}

/** Refusals answered here, counted for one report item. */
interface Tally {
  id: string;
  tenant: string;
  org: string;
  kind: string;
  fields: string;
  count: number;
  /** The clients waiting for their refusal to be recorded. */
  settled: Promise<void>;
  settle: () => void;
}

/**
 * The refusals remembered: a budget's (a repeat needing no less is refused too), a cap on calls
 * in flight (any repeat is, until a call of the org closes) and a suspension (any repeat is,
 * until the org's tenant.resumed).
 */
const REMEMBERED = new Set<Refused['code']>([
  'budget_exceeded',
  'concurrency_limit',
  'tenant_suspended',
  'use_case_not_registered',
  'model_not_allowed',
  'end_user_limit',
]);

/**
 * Refusals of what the config registers (a use case the team does not have, a model its use
 * case does not allow): no close changes them, only a config (the tenant as compiled).
 */
const BY_CONFIG = new Set<Refused['code']>(['use_case_not_registered', 'model_not_allowed']);

/**
 * Refusals no close changes: the config's, and a team's maxEndUsers (a close gives room back
 * to budgets and caps on calls in flight, never an end user's place; admit.lua checks the cap
 * before the suspension and those, so they do not hide it either).
 */
const NOT_BY_CLOSES = new Set<Refused['code']>([...BY_CONFIG, 'end_user_limit']);

/** A report carries at most this many items (RefusalsReportRequest). */
const REPORT_ITEMS = 256;
/** Longest wait between two reports while the authority does not take them. */
const MAX_REPORT_BACKOFF_MS = 5_000;

/**
 * The edge's memory of refusals. A tenant over its budget that keeps calling (a batch job's
 * workers, a client retrying in a loop) would otherwise cost a round trip to the authority, an
 * admit script in Redis and an event per call, and slow every other tenant down. After the
 * authority refuses a call with `budget_exceeded`, a repeat of it (same tenant, key, use case,
 * model, surface, tier, audio and tool bounds, end user when the budget is the end user's own,
 * and no smaller prompt or max_tokens: it needs at least as much in every unit) is refused here, with the authority's answer (its
 * Retry-After counted down), for `memoryMs` at most, never past that Retry-After, and only
 * until a call that could give the refusing window room closes on this edge or a new config is
 * applied; and not while such a call's close is running here (the authority may apply it at
 * any moment). The same holds for `concurrency_limit` (a cap on calls in flight, of the tenant or
 * an ancestor: other edges' calls count), whatever the repeat's size, until any call of the
 * org closes here, and for `tenant_suspended`, whatever the size, until the org's
 * `tenant.resumed` event (both for any call of the tenant), and for a use case or model the
 * config does not register, whatever the size, until a new config is applied. And for a team at
 * its `maxEndUsers` (`end_user_limit` of the team's own cap, when the authority sends the end
 * users it tracks: `trackedFilter`, a Bloom filter of at most 16,384): a call of the team
 * naming an end user not in it, with a use case and model the config registers and no stored
 * response or item to read, whatever its size, key or model, until a new config is applied; a
 * call naming a tracked end user (or none), or a new one the filter holds by chance (about 1
 * in 400), is asked of the authority as usual. A refusal here can therefore be
 * stale by at most that long when a call closes on another edge (or, for the end-user cap, when
 * one of the tracked end users is forgotten, idle for 31 days, and its place taken); it never
 * admits anything.
 *
 * Every refusal still ends in an `admission.refused` event: those answered here are counted
 * under the authority's refusal (Refused `summary`) and reported every `reportMs`, and each
 * client gets its answer once its report is recorded in Redis, so an edge killed at any point
 * loses none. A report the authority does not take is answered anyway (the refusal stands);
 * its counts are kept and sent again under the same ids, so none counts twice (only an edge
 * killed before that lands loses them), and the memory is off meanwhile: calls go to the
 * authority again.
 */
export class RefusalMemory {
  readonly #o: RefusalMemoryOptions;
  readonly #max: number;
  readonly #maxPerOrg: number;
  /** Remembered refusals by org, then by call shape. */
  readonly #orgs = new Map<string, Map<string, Remembered>>();
  #size = 0;
  readonly #maxTrackedBytes: number;
  /** Bytes of the `tracked` filters remembered, all orgs together. */
  #tracked = 0;
  /** Closes answered (and resumes seen) per org: an admit that raced one is not remembered. */
  readonly #closes = new Map<string, number>();
  /** Closes running on this edge, by org and tenant. */
  readonly #closing = new Map<string, Map<string, number>>();
  /** Refusals not yet reported, by org and summary kind. */
  readonly #open = new Map<string, Tally>();
  /** Items a failed report carried: sent again as they were. */
  #retry: Tally[] = [];
  #timer: NodeJS.Timeout | undefined;
  #reporting: Promise<void> | undefined;
  /** Between reports the authority did not take. */
  readonly #backoff: Backoff;
  /** The wait before the next report: `reportMs`, or the backoff's after a failure. */
  #delayMs: number;

  constructor(opts: RefusalMemoryOptions) {
    this.#o = opts;
    this.#max = opts.maxEntries ?? 10_000;
    this.#maxPerOrg = opts.maxPerOrg ?? 1_000;
    this.#maxTrackedBytes = opts.maxTrackedBytes ?? 4 * 1024 * 1024;
    this.#delayMs = opts.reportMs;
    this.#backoff = new Backoff({
      initialMs: Math.min(opts.reportMs * 2, MAX_REPORT_BACKOFF_MS),
      maxMs: MAX_REPORT_BACKOFF_MS,
      jitter: 'equal',
    });
  }

  /** Whether it remembers anything (`memoryMs` above 0). */
  get remembers(): boolean {
    return this.#o.memoryMs > 0;
  }

  /** The org's count of closes, taken before asking the authority (remember's `closes`). */
  closes(org: string): number {
    return this.#closes.get(org) ?? 0;
  }

  /**
   * The refusal to answer this call with, when it repeats one remembered: settles once the
   * refusal is counted (or its report failed). undefined: ask the authority. A call whose
   * prompt is not counted yet is asked with `promptTokens` 0, the least it can be: a refusal of
   * any size answers it, and a budget's only when it was itself of a prompt taken as 0 (an
   * uncounted admit's, admission.ts).
   */
  recall(req: AdmissionRequest): Promise<Refused> | undefined {
    const { tenant } = req.caller;
    const calls = this.#orgs.get(tenant.org);
    if (!calls) return undefined;
    const config = this.#configKey(req);
    // The team's end-user cap first (admit.lua checks it before anything else it remembers),
    // for an end user it does not track; then a refusal of the tenant, of the call whoever its
    // end user, of the call and end user.
    const cap = config === undefined && this.#newUser(req, calls) ? capKey(req) : undefined;
    const call = callKey(req);
    const user = req.endUser === undefined ? undefined : userKey(call, req.endUser);
    const key = [cap, tenantKey(req), config, call, user].find(
      (k) => k !== undefined && calls.has(k),
    );
    const r = key === undefined ? undefined : calls.get(key);
    if (key === undefined || !r) return undefined;
    const now = Date.now();
    if (now >= r.until || r.tenant !== tenant) {
      this.#drop(tenant.org, calls, key);
      return undefined;
    }
    const smaller = req.promptTokens < r.promptTokens || req.maxTokens < r.maxTokens;
    if (smaller && !r.anySize) return undefined;
    if (this.#closingUnder(tenant.org, r.refused)) return undefined;
    this.#o.metrics.localRefusals.inc({ tenant: tenant.id });
    const same =
      r.anySize || (req.promptTokens === r.promptTokens && req.maxTokens === r.maxTokens);
    const refused: Refused = {
      ...r.refused,
      windows: r.tracked
        ? // A new end user's windows, empty as the refused one's were.
          r.refused.windows
            .filter((w) => w.scope !== 'key' || r.keyId === req.caller.keyId)
            .map((w) => (w.scope === 'end_user' ? { ...w, subject: req.endUser } : w))
        : r.refused.windows.filter(
            (w) =>
              (w.scope !== 'key' || r.keyId === req.caller.keyId) &&
              (w.scope !== 'end_user' || r.endUser === req.endUser),
          ),
      retryAfterSeconds:
        r.retryAt === null ? null : Math.max(1, Math.ceil((r.retryAt - now) / 1_000)),
      message: same
        ? r.refused.message
        : `${r.refused.message} (Said of a call of ${r.promptTokens} prompt tokens and max_tokens ${r.maxTokens} refused moments ago; this one needs no less.)`,
      // The config's refusal names this call's use case and model (another made-up name).
      ...(BY_CONFIG.has(r.refused.code) ? notRegistered(req, r.refused.code) : {}),
    };
    return this.#count(tenant.id, tenant.org, r.refused.summary).then(() => refused);
  }

  /** Remembers the authority's refusal of this call, unless a close of its org raced it. */
  remember(req: AdmissionRequest, refused: Refused, closes: number): void {
    const { summary } = refused;
    if (this.#o.memoryMs === 0 || !REMEMBERED.has(refused.code) || !summary) return;
    if (refused.retryAfterSeconds === 0) return;
    const { tenant } = req.caller;
    if (this.closes(tenant.org) !== closes && !NOT_BY_CLOSES.has(refused.code)) return;
    if (this.#closingUnder(tenant.org, refused)) return;
    // A team's end-user cap, only with the end users it tracks (the others it would refuse).
    const { trackedFilter: filter, ...rest } = refused;
    const capped = refused.code === 'end_user_limit';
    const tracked = capped && filter ? endUserSet(filter) : undefined;
    if (
      capped &&
      (!tracked ||
        this.#tracked - this.#trackedBy(req) + tracked.bytes.length > this.#maxTrackedBytes)
    ) {
      return;
    }
    const now = Date.now();
    if (this.#size >= this.#max && this.#sweep(now) >= this.#max) return;
    const retryAt =
      refused.retryAfterSeconds === null ? null : now + refused.retryAfterSeconds * 1_000;
    let calls = this.#orgs.get(tenant.org);
    if (!calls) {
      calls = new Map<string, Remembered>();
      this.#orgs.set(tenant.org, calls);
    }
    const key = capped
      ? capKey(req)
      : (BY_CONFIG.has(refused.code) && this.#configKey(req)) || memoryKey(req, refused);
    this.#untrack(calls.get(key));
    if (!calls.has(key)) {
      if (
        calls.size >= this.#maxPerOrg &&
        this.#sweepOrg(tenant.org, calls, now) >= this.#maxPerOrg
      ) {
        return;
      }
      this.#size++;
      // A sweep that emptied the org's map took it out.
      this.#orgs.set(tenant.org, calls);
    }
    calls.set(key, {
      tenant,
      promptTokens: req.promptTokens,
      maxTokens: req.maxTokens,
      anySize: refused.code !== 'budget_exceeded',
      keyId: req.caller.keyId,
      endUser: req.endUser,
      until: Math.min(now + this.#o.memoryMs, retryAt ?? Infinity),
      retryAt,
      refused: { ...rest, summary },
      ...(tracked ? { tracked } : {}),
    });
    if (tracked) this.#tracked += tracked.bytes.length;
  }

  /**
   * A close of a call of `tenant` starts: until it ends, the authority may give its levels room
   * back at any moment, so their refusals are neither answered here nor remembered.
   */
  closing(org: string, tenant: string): void {
    let tenants = this.#closing.get(org);
    if (!tenants) this.#closing.set(org, (tenants = new Map<string, number>()));
    tenants.set(tenant, (tenants.get(tenant) ?? 0) + 1);
  }

  /**
   * A close of a call of `tenant` ended (answered, handed over or given up): the refusals of
   * the levels it may have given room back to (the tenant and its ancestors) are forgotten,
   * every one of the org's when the tenant is not in the config.
   */
  closed(org: string, tenant: string): void {
    this.#closes.set(org, this.closes(org) + 1);
    const tenants = this.#closing.get(org);
    const left = (tenants?.get(tenant) ?? 0) - 1;
    if (left > 0) tenants!.set(tenant, left);
    else tenants?.delete(tenant);
    if (tenants?.size === 0) this.#closing.delete(org);
    const calls = this.#orgs.get(org);
    if (!calls) return;
    const chain = this.#o.config()?.tenants.get(tenant)?.chain;
    for (const [key, r] of calls) {
      if (NOT_BY_CLOSES.has(r.refused.code)) continue;
      if (!chain || r.refused.level === null || chain.includes(r.refused.level)) {
        this.#drop(org, calls, key);
      }
    }
  }

  /**
   * Where a refusal of the config is remembered, for a call this edge's config does not
   * register (undefined for one it does): a use case or model it does not know stands as `*`,
   * as in the authority's summary kind, so a client making up a new name each call is answered
   * by the one refusal (before, each name was asked of the authority).
   */
  #configKey(req: AdmissionRequest): string | undefined {
    const { tenant, keyId, useCase } = req.caller;
    const known = tenant.useCases.get(useCase);
    if (known?.models.includes(req.model)) return undefined;
    const model = this.#o.config()?.models.has(req.model) ? req.model : '*';
    return [tenant.id, keyId ?? '', known ? useCase : '*', model, req.api, '*'].join('\u0000');
  }

  /**
   * Whether the call names an end user its team's remembered end-user cap would refuse: one
   * the team's filter surely does not hold, on a call the authority reaches its cap's check
   * with (no stored response or item to read: whose it is is checked first).
   */
  #newUser(req: AdmissionRequest, calls: Map<string, Remembered>): boolean {
    if (req.endUser === undefined || req.previousResponseId || (req.itemIds?.length ?? 0) > 0) {
      return false;
    }
    const tracked = calls.get(capKey(req))?.tracked;
    return tracked !== undefined && !mayTrack(tracked, req.endUser);
  }

  /** The bytes of the team's remembered end-user filter (0: none remembered). */
  #trackedBy(req: AdmissionRequest): number {
    return this.#orgs.get(req.caller.tenant.org)?.get(capKey(req))?.tracked?.bytes.length ?? 0;
  }

  /** The filter an entry kept no longer counts against `maxTrackedBytes`. */
  #untrack(r: Remembered | undefined): void {
    if (r?.tracked) this.#tracked -= r.tracked.bytes.length;
  }

  /**
   * A close that may change the refusal is running on this edge: one under its level (null:
   * any level of the org); none for a refusal of the config.
   */
  #closingUnder(org: string, { code, level }: Pick<Refused, 'code' | 'level'>): boolean {
    if (NOT_BY_CLOSES.has(code)) return false;
    const tenants = this.#closing.get(org);
    if (!tenants) return false;
    if (level === null) return true;
    const config = this.#o.config();
    for (const tenant of tenants.keys()) {
      const chain = config?.tenants.get(tenant)?.chain;
      if (!chain || chain.includes(level)) return true;
    }
    return false;
  }

  /**
   * A tenant was resumed (its `tenant.resumed` event): the suspensions remembered in its org
   * (its own, or an ancestor's that its descendants were refused for) are forgotten.
   */
  resumed(tenant: string): void {
    const org = this.#o.config()?.tenants.get(tenant)?.org;
    // An admit that raced the resume is not remembered either.
    if (org !== undefined) this.#closes.set(org, this.closes(org) + 1);
    for (const [o, calls] of this.#orgs) {
      if (org !== undefined && o !== org) continue;
      for (const [key, r] of calls) {
        if (r.refused.code === 'tenant_suspended') this.#drop(o, calls, key);
      }
    }
  }

  /** How many refusals are remembered. */
  get size(): number {
    return this.#size;
  }

  /** An authority (re)started: counts a report could not deliver go now, not a backoff later. */
  wake(): void {
    if (this.#retry.length === 0 || this.#reporting) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#backoff.reset();
    this.#delayMs = this.#o.reportMs;
    this.#schedule(0);
  }

  /** Reports what is still unreported (at shutdown). */
  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#reporting;
    if (this.#open.size > 0 || this.#retry.length > 0) await this.#report();
  }

  #drop(org: string, calls: Map<string, Remembered>, key: string): void {
    this.#untrack(calls.get(key));
    if (calls.delete(key)) this.#size--;
    if (calls.size === 0) this.#orgs.delete(org);
  }

  /** Forgets what has expired; returns how many are left. */
  #sweep(now: number): number {
    for (const [org, calls] of this.#orgs) this.#sweepOrg(org, calls, now);
    return this.#size;
  }

  /** Forgets what of one org has expired; returns how many of its are left. */
  #sweepOrg(org: string, calls: Map<string, Remembered>, now: number): number {
    for (const [key, r] of calls) if (now >= r.until) this.#drop(org, calls, key);
    return calls.size;
  }

  #count(tenant: string, org: string, summary: Remembered['refused']['summary']): Promise<void> {
    const k = `${org}\u0000${summary.kind}`;
    let tally = this.#open.get(k);
    if (!tally) {
      let settle!: () => void;
      const settled = new Promise<void>((resolve) => (settle = resolve));
      tally = {
        id: randomUUID(),
        tenant,
        org,
        kind: summary.kind,
        fields: summary.fields,
        count: 0,
        settled,
        settle,
      };
      this.#open.set(k, tally);
    }
    tally.count++;
    this.#schedule();
    return tally.settled;
  }

  #schedule(delayMs = this.#delayMs): void {
    if (this.#timer || this.#reporting) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#reporting = this.#report().finally(() => {
        this.#reporting = undefined;
        if (this.#open.size > 0 || this.#retry.length > 0) this.#schedule();
      });
    }, delayMs);
    this.#timer.unref();
  }

  /** Sends every unreported count; each waiting client is answered either way. */
  async #report(): Promise<void> {
    const tallies = [...this.#retry, ...this.#open.values()];
    this.#retry = [];
    this.#open.clear();
    for (let i = 0; i < tallies.length; i += REPORT_ITEMS) {
      const part = tallies.slice(i, i + REPORT_ITEMS);
      const req: RefusalsReportRequest = {
        items: part.map(({ id, tenant, org, kind, fields, count }) => ({
          id,
          tenant,
          org,
          kind,
          fields,
          count,
        })),
      };
      const sent = await this.#o.authority
        .reportRefusals(req)
        .catch((err: unknown) => ({ ok: false as const, error: { code: String(err) } }));
      if (sent.ok) {
        this.#backoff.reset();
        this.#delayMs = this.#o.reportMs;
      } else {
        // Sent again as they are (same ids: none counts twice); meanwhile every call asks the
        // authority, which decides and records it.
        this.#delayMs = this.#backoff.next();
        this.#retry.push(...part);
        this.#forgetAll();
        this.#o.logger.warn(
          { code: sent.error.code, items: part.length },
          'refusal report not taken; the edge stops answering refusals itself until it is',
        );
      }
      for (const t of part) t.settle();
    }
  }

  #forgetAll(): void {
    this.#orgs.clear();
    this.#size = 0;
    this.#tracked = 0;
  }
}

/**
 * The config's refusal of this call, as the authority words it (messages.ts): its use case
 * not registered for the team, or its model not allowed for that use case.
 */
export function notRegistered(
  req: Pick<AdmissionRequest, 'caller' | 'model'>,
  code: Refused['code'] = req.caller.tenant.useCases.has(req.caller.useCase)
    ? 'model_not_allowed'
    : 'use_case_not_registered',
): { code: 'model_not_allowed' | 'use_case_not_registered'; message: string } {
  const { tenant, useCase } = req.caller;
  return code === 'use_case_not_registered'
    ? { code, message: `Use case "${useCase}" is not registered for team ${tenant.id}.` }
    : {
        code: 'model_not_allowed',
        message: `Model "${req.model}" is not allowed for use case "${useCase}" of team ${tenant.id}.`,
      };
}

/**
 * Where a refusal is remembered, so that it answers every call it would refuse and no other. A
 * suspension or a cap on calls in flight refuses any call of the tenant (tenantKey); a budget's,
 * or the config's (a use case or model not registered), any call that picks the same budgets
 * and prices (callKey), whoever its end user unless the budget is the end user's own
 * (userKey). Before, every refusal was keyed by its end user, so
 * a client naming a new `user` on each call (any SDK lets it) was asked of the authority every
 * time: an admit in Redis per call, as with no memory at all.
 */
function memoryKey(req: AdmissionRequest, refused: Refused): string {
  if (refused.code === 'tenant_suspended' || refused.code === 'concurrency_limit') {
    return tenantKey(req);
  }
  const call = callKey(req);
  // An older authority does not say whose budget it was: any end user's of that id.
  const own =
    refused.scope === undefined
      ? refused.windows.some((w) => w.scope === 'end_user' && w.budget === refused.budget)
      : refused.scope === 'end_user';
  return own && req.endUser !== undefined ? userKey(call, req.endUser) : call;
}

function tenantKey(req: AdmissionRequest): string {
  return req.caller.tenant.id;
}

/** Where a team's end-user cap is remembered: one for the team, whatever the call. */
function capKey(req: AdmissionRequest): string {
  return `${req.caller.tenant.id}\u0000end_user_limit`;
}

function userKey(call: string, endUser: string): string {
  return `${call}\u0000${endUser}`;
}

/**
 * What must be equal for a call to repeat a refused one (the amounts and the end user aside):
 * everything that picks its budgets or its prices. Tool bounds in a fixed key order.
 */
function callKey(req: AdmissionRequest): string {
  const { caller } = req;
  const tools = req.toolUses
    ? Object.entries(req.toolUses)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    : '';
  return [
    caller.tenant.id,
    caller.keyId ?? '',
    caller.useCase,
    req.model,
    req.api,
    req.serviceTier ?? 'default',
    req.audioInput === true ? '1' : '0',
    req.audioOutput === true ? '1' : '0',
    req.extensible ? '1' : '0',
    tools,
  ].join('\u0000');
}
