import type { ServerResponse } from 'node:http';
import { CallAborted, type AbortWhy } from './upstream/client.js';

/** One admitted call in flight; the edge can end it early (client gone, tenant suspended). */
export class LiveCall {
  readonly #controller = new AbortController();

  /** `chain`: the tenant, then its parent, ..., then the org. */
  constructor(
    readonly tenant: string,
    readonly chain: readonly string[],
  ) {}

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why the edge ended the call, if it did. */
  get abortedBy(): AbortWhy | undefined {
    const reason: unknown = this.#controller.signal.reason;
    return reason instanceof CallAborted ? reason.why : undefined;
  }

  abort(why: AbortWhy): void {
    if (!this.#controller.signal.aborted) this.#controller.abort(new CallAborted(why));
  }
}

/**
 * Calls in flight by tenant, so a suspension can end a tenant's calls after its grace
 * (SPEC section 7). Timers are cleared on close.
 */
export class Calls {
  readonly #byTenant = new Map<string, Set<LiveCall>>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #detach = new Map<LiveCall, () => void>();

  /**
   * Starts tracking a call. With the client's response, the call is aborted when the client
   * goes away before the response has finished.
   */
  start(tenant: { id: string; chain: readonly string[] }, res?: ServerResponse): LiveCall {
    const call = new LiveCall(tenant.id, tenant.chain);
    let set = this.#byTenant.get(tenant.id);
    if (!set) this.#byTenant.set(tenant.id, (set = new Set()));
    set.add(call);
    if (res) {
      const onClose = () => {
        if (!res.writableFinished) call.abort('client_disconnected');
      };
      res.on('close', onClose);
      this.#detach.set(call, () => res.off('close', onClose));
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

  count(tenant?: string): number {
    if (tenant !== undefined) return this.#byTenant.get(tenant)?.size ?? 0;
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
   * passed; returns how many are live now.
   */
  suspend(tenant: string, graceMs: number): number {
    const live = this.#under(tenant).length;
    const end = () => {
      for (const call of this.#under(tenant)) call.abort('suspended');
    };
    if (graceMs <= 0) {
      end();
      return live;
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      end();
    }, graceMs);
    timer.unref();
    this.#timers.add(timer);
    return live;
  }

  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
