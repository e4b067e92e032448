import {
  utilisation,
  type SuspendRequest,
  type TenantResumed,
  type TenantSuspended,
  type TenantUsage,
} from '@holdfast/events';
import {
  errorMessage,
  every,
  type AuthorityClient,
  type Logger,
  type Periodic,
} from '@holdfast/runtime';
import { z } from 'zod';
import type { AlerterMetrics } from './metrics.js';
import { casLoop, stateKeys, type StateStore } from './state-store.js';

/** Who suspended a tenant last, as the authority's events said. */
const SuspensionRecord = z.object({
  state: z.enum(['suspended', 'resumed']),
  by: z.string(),
  budget: z.string().nullable(),
  time: z.string(),
});
type SuspensionRecord = z.infer<typeof SuspensionRecord>;

/**
 * Suspension at the hard limit and automatic resumption.
 *
 * The alerter asks the authority to suspend (the authority records it and emits
 * `tenant.suspended`); it never keeps its own idea of whether a tenant is suspended. It does
 * remember, from those events, who suspended each tenant, so it resumes only what it
 * suspended: an admin's suspension stays until an admin resumes. No event fires when usage
 * ages out of a sliding window, so it polls the authority's usage for that.
 */
export class SuspensionController {
  readonly #authority: AuthorityClient;
  readonly #store: StateStore;
  readonly #logger: Logger;
  readonly #metrics: AlerterMetrics;
  readonly #pollMs: number;
  #timer: Periodic | undefined;
  #lastPollOk = true;

  constructor(opts: {
    authority: AuthorityClient;
    store: StateStore;
    logger: Logger;
    metrics: AlerterMetrics;
    pollMs: number;
  }) {
    this.#authority = opts.authority;
    this.#store = opts.store;
    this.#logger = opts.logger;
    this.#metrics = opts.metrics;
    this.#pollMs = opts.pollMs;
  }

  /** Asks the authority to suspend; throws when it cannot answer, so the caller retries. */
  async suspend(request: SuspendRequest): Promise<void> {
    const reply = await this.#authority.suspend(request);
    if (!reply.ok) throw reply.error;
    this.#metrics.suspensions.inc({ action: 'suspend' });
    this.#logger.warn(
      { tenant: request.tenant, budget: request.budget, changed: reply.value.changed },
      'suspended at hard limit',
    );
  }

  /** Remembers who suspended or resumed a tenant; an older event never overrides a newer one. */
  async record(event: TenantSuspended | TenantResumed): Promise<void> {
    const key = stateKeys.suspension(event.tenant);
    const next: SuspensionRecord = {
      state: event.type === 'tenant.suspended' ? 'suspended' : 'resumed',
      by: event.by,
      budget: event.type === 'tenant.suspended' ? event.budget : null,
      time: event.time,
    };
    await casLoop(async () => {
      const { value, revision } = await this.#store.read(key, SuspensionRecord.nullable(), null);
      if (value && value.time >= next.time) return { done: true, result: undefined };
      const rev = await this.#store.compareAndSet(key, next, revision);
      return rev === undefined ? { done: false } : { done: true, result: undefined };
    }, `suspension ${key}`);
  }

  start(): void {
    this.#timer = every(this.#pollMs, () => this.poll(), {
      logger: this.#logger,
      failed: 'usage poll failed',
    });
  }

  async stop(): Promise<void> {
    await this.#timer?.stop();
  }

  /** false after a usage poll failed (the authority did not answer). */
  get healthy(): boolean {
    return this.#lastPollOk;
  }

  /** Resumes every tenant the alerter suspended whose enforced windows are below 100% again. */
  async poll(): Promise<void> {
    const reply = await this.#authority.usage({});
    this.#metrics.usagePolls.inc({ result: reply.ok ? 'ok' : reply.error.code });
    // Log a change of state only: without an authority every poll fails the same way.
    if (reply.ok !== this.#lastPollOk) {
      if (reply.ok) this.#logger.info('usage poll answered again');
      else this.#logger.warn({ err: reply.error.message }, 'usage poll failed');
    }
    this.#lastPollOk = reply.ok;
    if (!reply.ok) return;
    for (const t of reply.value.tenants) {
      if (!t.suspended || !freed(t)) continue;
      try {
        await this.#resumeIfOurs(t.tenant);
      } catch (err) {
        this.#logger.warn({ err: errorMessage(err), tenant: t.tenant }, 'resume failed');
      }
    }
  }

  async #resumeIfOurs(tenant: string): Promise<void> {
    const { value } = await this.#store.read(
      stateKeys.suspension(tenant),
      SuspensionRecord.nullable(),
      null,
    );
    if (value?.state !== 'suspended' || value.by !== 'alerter') return;
    const reply = await this.#authority.resume({ tenant, by: 'window_freed' });
    if (!reply.ok) throw reply.error;
    this.#metrics.suspensions.inc({ action: 'resume' });
    this.#logger.info({ tenant, changed: reply.value.changed }, 'resumed: window freed room');
  }
}

/** Every enforced window of the tenant itself is below its limit. */
function freed(t: TenantUsage): boolean {
  return t.windows
    .filter((w) => w.tenant === t.tenant && w.enforce && w.limit > 0)
    .every((w) => utilisation(w) < 1);
}
