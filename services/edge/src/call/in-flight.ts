import type { ServerResponse } from 'node:http';
import { CallAborted, type AbortWhy } from '../upstream/client.js';
import { connectionOf, onResponseGone } from '../request/response-gone.js';
import { CallSignal } from './call-signal.js';

/** One admitted call in flight; the edge can end it early (client gone, tenant suspended). */
export class LiveCall {
  /** An AbortSignal to its readers, at a fraction of the cost of one (call-signal.ts). */
  readonly #signal = new CallSignal();

  /**
   * `chain`: the tenant, then its parent, ..., then the org. `startedAtMs`: when the call
   * was admitted (a suspension only ends calls admitted before it).
   */
  constructor(
    readonly tenant: string,
    readonly chain: readonly string[],
    readonly startedAtMs: number = Date.now(),
  ) {}

  get signal(): AbortSignal {
    return this.#signal;
  }

  /** Why the edge ended the call, if it did. */
  get abortedBy(): AbortWhy | undefined {
    const reason: unknown = this.#signal.reason;
    return reason instanceof CallAborted ? reason.why : undefined;
  }

  abort(why: AbortWhy): void {
    if (!this.#signal.aborted) this.#signal.abort(new CallAborted(why));
  }
}

/**
 * Calls in flight by tenant, so a suspension can end a tenant's calls after its grace
 * (docs/alerts.md). Timers are cleared on close.
 */
export class Calls {
  readonly #byTenant = new Map<string, Set<LiveCall>>();
  /** Pending grace ends by suspended tenant (a resume cancels them). */
  readonly #timers = new Map<string, Set<NodeJS.Timeout>>();
  readonly #detach = new Map<LiveCall, () => void>();
  /** Tenants whose `tenant.suspended` this edge saw, and no `tenant.resumed` since. */
  readonly #suspended = new Set<string>();
  /** Tenants an event has spoken of: newer than what the authority said at start. */
  readonly #heard = new Set<string>();

  /**
   * Starts tracking a call. With the client's response, the call is aborted when the client
   * goes away before the response has finished.
   */
  start(
    tenant: { id: string; chain: readonly string[] },
    res?: ServerResponse,
    nowMs = Date.now(),
  ): LiveCall {
    const call = new LiveCall(tenant.id, tenant.chain, nowMs);
    let set = this.#byTenant.get(tenant.id);
    if (!set) this.#byTenant.set(tenant.id, (set = new Set()));
    set.add(call);
    if (res) {
      const onClose = () => {
        if (!res.writableFinished) call.abort('client_disconnected');
      };
      // A client that left before the call started (while its body was read or its prompt
      // counted) has no close event left to fire: its call is aborted from the start. A
      // pipelined response has no socket of its own yet: its request's is the connection.
      if (res.destroyed || connectionOf(res)?.destroyed !== false) {
        call.abort('client_disconnected');
      }
      this.#detach.set(call, onResponseGone(res, onClose));
    }
    return call;
  }

  end(call: LiveCall): void {
    this.#detach.get(call)?.();
    this.#detach.delete(call);
    const set = this.#byTenant.get(call.tenant);
    set?.delete(call);
    if (set?.size === 0) this.#byTenant.delete(call.tenant);
  }

  /** Calls in flight on this edge (shutdown waits for them). */
  count(): number {
    let n = 0;
    for (const set of this.#byTenant.values()) n += set.size;
    return n;
  }

  /** Calls of this tenant or of any team below it. */
  #under(tenant: string): LiveCall[] {
    return [...this.#byTenant.values()].flatMap((set) =>
      [...set].filter((c) => c.chain.includes(tenant)),
    );
  }

  /**
   * Ends the calls in flight of a tenant (and of the teams below it) once `graceMs` has
   * passed; returns how many are live now. Only calls admitted before `suspendedAtMs` (the
   * event's time) are ended: a notice that arrives late, after a resume, must not end the
   * calls admitted since.
   */
  suspend(tenant: string, graceMs: number, suspendedAtMs = Date.now()): number {
    this.#suspended.add(tenant);
    this.#heard.add(tenant);
    const admittedBefore = () => this.#under(tenant).filter((c) => c.startedAtMs <= suspendedAtMs);
    const live = admittedBefore().length;
    const end = () => {
      for (const call of admittedBefore()) call.abort('suspended');
    };
    if (graceMs <= 0) {
      end();
      return live;
    }
    let pending = this.#timers.get(tenant);
    if (!pending) this.#timers.set(tenant, (pending = new Set()));
    const timer = setTimeout(() => {
      pending.delete(timer);
      end();
    }, graceMs);
    timer.unref();
    pending.add(timer);
    return live;
  }

  /** A resume cancels the grace ends still pending for that tenant; returns how many. */
  resume(tenant: string): number {
    this.#suspended.delete(tenant);
    this.#heard.add(tenant);
    const pending = this.#timers.get(tenant);
    this.#timers.delete(tenant);
    for (const t of pending ?? []) clearTimeout(t);
    return pending?.size ?? 0;
  }

  /**
   * Tenants suspended before this edge started, as the authority said (no event will): no
   * calls to end, and a tenant an event has spoken of since is left as the event said. Returns
   * those taken.
   */
  suspendedAlready(tenants: readonly string[]): string[] {
    const taken = tenants.filter((t) => !this.#heard.has(t));
    for (const t of taken) this.#suspended.add(t);
    return taken;
  }

  /**
   * Whether a tenant of `chain` (the team, its org) is suspended as far as this edge has seen:
   * what it can say when the authority cannot (a failOpen team's call while it is down).
   */
  suspended(chain: readonly string[]): boolean {
    return this.#suspended.size > 0 && chain.some((t) => this.#suspended.has(t));
  }

  close(): void {
    for (const pending of this.#timers.values()) for (const t of pending) clearTimeout(t);
    this.#timers.clear();
  }
}
