import { Backoff, retry, sleep, Wakeup, type RetryPolicy } from '@holdfast/retry';
import {
  closeSubject,
  type DeferredClose,
  type NatsNames,
  type ReleaseReason,
  type SettleOutcome,
  type Usage,
} from '@holdfast/events';
import type { AuthorityClient, Logger } from '@holdfast/runtime';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { EdgeMetrics } from '../metrics.js';

export type Close = (
  | { how: 'settle'; usage: Usage; outcome: SettleOutcome }
  | {
      how: 'release';
      reason: ReleaseReason;
      /** The attempts its upstream answered with an error (ReleaseRequest.answeredRequests). */
      answeredRequests?: number;
    }
) & {
  /** The response the upstream stored for the call: recorded as the tenant's (SettleRequest). */
  responseId?: string;
  /** The output items it stored with it: recorded as the tenant's (SettleRequest). */
  itemIds?: string[];
};

/** Where a reservation lives: its id, its tenant and the org it was admitted under. */
export interface HoldRef {
  reservationId: string;
  tenant: string;
  org: string;
  /** The upstream whose capacity the admission took. */
  upstream?: string;
  /**
   * The call's model: its capacity is closed with the upstream's, and its current tool-use
   * prices bill tool uses reported that the hold kept no prices for.
   */
  model?: string;
  /** The call's key and end user (their budgets' windows are reported on the close). */
  keyId?: string | null;
  endUser?: string;
}

export interface HoldsOptions {
  authority: Pick<AuthorityClient, 'settle' | 'release'>;
  /** The closes stream: where a close the authority could not take waits for it. */
  js: Pick<JetStreamClient, 'publish'>;
  names: NatsNames;
  logger: Logger;
  metrics: EdgeMetrics;
  /** Timeout of one settle/release request. */
  timeoutMs: number;
  /** Request-reply attempts before the close is handed to the closes stream. */
  attempts: number;
  /** First backoff between attempts; doubles, capped at 5 s. */
  backoffMs?: number;
  /** How long `drain()` keeps trying to hand closes over before it gives up on them. */
  drainTimeoutMs?: number;
  /**
   * Told when a close starts and when it ends (answered, handed over or given up): while it
   * runs its levels' budgets may get room back at any moment.
   */
  closes?: { started: (ref: HoldRef) => void; ended: (ref: HoldRef) => void };
}

/** Errors after which the same settle/release may succeed later. */
const RETRYABLE = new Set(['timeout', 'no_responders', 'budget_store_unavailable']);
/** Publishing a close to the closes stream never gives up while the edge runs. */
const HAND_OVER: RetryPolicy = { initialMs: 100, maxMs: 5_000 };

/**
 * Closes reservations: every settle or release runs in the background (the authority makes
 * both idempotent), so the client's response never waits for it. A close the authority does
 * not take after a few attempts (it is down, or its Redis is) is not given up: it is published
 * to the closes stream, a JetStream work queue the authority drains when it is back, so the
 * real usage is billed late rather than lost, across a restart of this edge too. Publishing
 * is retried until JetStream takes it; only `drain()` at shutdown gives up, after its timeout
 * (the hold's lease then expires it, billed at its worst case in reserve mode).
 *
 * When an authority replica announces its start, `wake()` ends the backoff of every close
 * waiting between attempts: they go at once, in one batch, rather than up to a step (5 s)
 * later. A hold whose lease ran out meanwhile is billed at its worst case until its settle
 * lands, so a tenant near its limit could be refused for those seconds.
 */
export class Holds {
  readonly #o: HoldsOptions;
  readonly #pending = new Set<Promise<void>>();
  readonly #wakeup = new Wakeup();
  #draining = false;
  /** Responses calls of this edge stored, by id: whose, and the call (until its close ends). */
  readonly #stored = new Map<string, { tenant: string; reservationId: string }>();
  /** Those calls by reservation: their ids, and their close's end. */
  readonly #storing = new Map<string, { ids: string[]; closed: Promise<void>; end: () => void }>();

  constructor(opts: HoldsOptions) {
    this.#o = opts;
  }

  /** A hold for an admitted reservation; closing it twice is a no-op. */
  open(ref: HoldRef): Hold {
    this.#o.metrics.inFlight.inc();
    return new Hold(ref, (close) => {
      this.#o.metrics.inFlight.dec();
      return this.close(ref, close);
    });
  }

  /** Runs one close in the background, tracked until it is answered or handed over. */
  close(ref: HoldRef, close: Close): Promise<void> {
    const { closesPending } = this.#o.metrics;
    closesPending.inc();
    this.#o.closes?.started(ref);
    const run = this.#run(ref, close).finally(() => {
      this.#pending.delete(run);
      closesPending.dec();
      this.#o.closes?.ended(ref);
      this.#endStored(ref.reservationId);
    });
    this.#pending.add(run);
    return run;
  }

  /**
   * The upstream stored `responseId` for the (metered) call of `ref`: until its close is
   * answered (which records the owner), a continuation of it from its tenant on this edge waits
   * for it (`ownerRecorded`), rather than reach the authority first and be told it is unknown.
   */
  storing(ref: HoldRef, responseId: string): void {
    if (this.#stored.has(responseId)) return;
    let call = this.#storing.get(ref.reservationId);
    if (!call) {
      let end!: () => void;
      const closed = new Promise<void>((resolve) => (end = resolve));
      call = { ids: [], closed, end };
      this.#storing.set(ref.reservationId, call);
    }
    call.ids.push(responseId);
    this.#stored.set(responseId, { tenant: ref.tenant, reservationId: ref.reservationId });
  }

  /**
   * Resolves when the owner of a response (or item) a call of `tenant` stored on this edge is
   * recorded (its close answered, handed over or given up), after the close's request-reply
   * attempts could have run at most (`timeoutMs` each and their backoff); at once for any other
   * id (another tenant's, or one no call here is closing). Not the admit's timeout: a close
   * slower than that (a loaded authority) would have the team's next step refused as not its
   * own (every stateless reasoning loop names its sealed reasoning).
   */
  async ownerRecorded(tenant: string, responseId: string): Promise<void> {
    const stored = this.#stored.get(responseId);
    const call = stored?.tenant === tenant && this.#storing.get(stored.reservationId);
    if (!call) return;
    const timer = new AbortController();
    await Promise.race([call.closed, sleep(this.#closeBoundMs(), timer.signal)]);
    timer.abort();
  }

  /** `ownerRecorded` for each response and item a call names (its previous response first). */
  async ownersRecorded(
    tenant: string,
    named: { previousResponseId?: string | undefined; itemIds?: string[] | undefined },
  ): Promise<void> {
    const ids = [
      ...(named.previousResponseId ? [named.previousResponseId] : []),
      ...(named.itemIds ?? []),
    ];
    await Promise.all(ids.map((id) => this.ownerRecorded(tenant, id)));
  }

  /** The longest a close's request-reply attempts take before it is handed over. */
  #closeBoundMs(): number {
    const { timeoutMs, attempts, backoffMs = 100 } = this.#o;
    let bound = timeoutMs * attempts;
    for (let i = 1, step = backoffMs; i < attempts; i++, step = Math.min(step * 2, 5_000)) {
      bound += step;
    }
    return bound;
  }

  #endStored(reservationId: string): void {
    const call = this.#storing.get(reservationId);
    if (!call) return;
    this.#storing.delete(reservationId);
    for (const id of call.ids) this.#stored.delete(id);
    call.end();
  }

  get pending(): number {
    return this.#pending.size;
  }

  /** The authority is back: closes waiting out a backoff step try again now. */
  wake(): void {
    const woken = this.#wakeup.wake();
    if (woken > 0) this.#o.logger.info({ woken }, 'authority started: owed closes sent now');
  }

  /** Waits for the closes still running; after the drain timeout, stops retrying them. */
  async drain(): Promise<void> {
    this.#draining = true;
    const timeout = sleep(this.#o.drainTimeoutMs ?? 10_000);
    await Promise.race([Promise.all([...this.#pending]), timeout]);
    if (this.#pending.size > 0) {
      this.#o.logger.error(
        { pending: this.#pending.size },
        'closes still undelivered at shutdown: their leases will expire them',
      );
    }
  }

  async #run(ref: HoldRef, close: Close): Promise<void> {
    const { authority, logger, metrics, timeoutMs, attempts } = this.#o;
    const label = close.how === 'settle' ? close.outcome : close.reason;
    const request = closeRequest(ref, close);
    const reply = await retry(
      () =>
        close.how === 'settle'
          ? authority.settle({ ...request, usage: close.usage, outcome: close.outcome }, timeoutMs)
          : authority.release({ ...request, ...releaseFields(close) }, timeoutMs),
      {
        policy: { initialMs: this.#o.backoffMs ?? 100, maxMs: 5_000, maxAttempts: attempts },
        retryIf: (r) => !r.ok && RETRYABLE.has(r.error.code),
        retryable: () => false,
        wakeup: this.#wakeup,
      },
    );
    if (reply.ok) {
      metrics.holdsClosed.inc({ how: close.how, outcome: label });
      const { status } = reply.value;
      if (status === 'already_expired' || (status === 'unknown' && close.how === 'settle')) {
        logger.warn({ ...request, status, close }, 'hold closed too late');
      }
      return;
    }
    const { code } = reply.error;
    if (code === 'invalid_request' && (close.responseId ?? close.itemIds) !== undefined) {
      // An authority older than response owners refuses the fields (a deploy that upgraded
      // the edges first): the usage goes without them, the response stays unowned.
      logger.warn({ ...request, code }, 'response owner refused by the authority: closing without');
      const { responseId: _, itemIds: __, ...without } = close;
      return this.#run(ref, without);
    }
    if (code === 'invalid_request' && close.how === 'release' && close.answeredRequests) {
      // An authority older than answeredRequests refuses it: released without (the upstream's
      // capacity gets the requests back, as before), never left held.
      logger.warn(
        { ...request, code },
        'answeredRequests refused by the authority: releasing without',
      );
      const { answeredRequests: _, ...without } = close;
      return this.#run(ref, without);
    }
    if (!RETRYABLE.has(code)) {
      metrics.holdCloseFailures.inc({ how: close.how });
      logger.error({ ...request, code, close }, `${close.how} refused by the authority`);
      return;
    }
    await this.#handOver(ref, close);
  }

  /** Publishes the close to the closes stream, retrying until JetStream acknowledges it. */
  async #handOver(ref: HoldRef, close: Close): Promise<void> {
    const { js, names, logger, metrics } = this.#o;
    const request = closeRequest(ref, close);
    const deferred: DeferredClose =
      close.how === 'settle'
        ? { op: 'settle', request: { ...request, usage: close.usage, outcome: close.outcome } }
        : { op: 'release', request: { ...request, ...releaseFields(close) } };
    const body = JSON.stringify(deferred);
    const backoff = new Backoff(HAND_OVER);
    for (let attempt = 1; ; attempt++) {
      try {
        // One close per reservation: the msgID makes a republish (or a second edge) a no-op.
        await js.publish(closeSubject(names, ref.org), body, {
          msgID: `close-${ref.reservationId}`,
          timeout: this.#o.timeoutMs,
        });
        metrics.holdsDeferred.inc({ how: close.how });
        logger.warn({ ...request, how: close.how }, 'authority unavailable: close deferred');
        return;
      } catch (err) {
        if (this.#draining && attempt > 3) {
          metrics.holdCloseFailures.inc({ how: close.how });
          logger.error({ ...request, err, close }, 'close lost at shutdown');
          return;
        }
        if (attempt === 1) logger.warn({ ...request, err }, 'closes stream unavailable; retrying');
        await sleep(backoff.next());
      }
    }
  }
}

/** A release's own fields. */
function releaseFields(close: Extract<Close, { how: 'release' }>) {
  return {
    reason: close.reason,
    ...(close.answeredRequests ? { answeredRequests: close.answeredRequests } : {}),
  };
}

/** The fields of a settle or release that name the reservation (and the response it stored). */
function closeRequest(ref: HoldRef, close: Close) {
  return {
    reservationId: ref.reservationId,
    tenant: ref.tenant,
    org: ref.org,
    ...(ref.upstream ? { upstream: ref.upstream } : {}),
    ...(ref.model ? { model: ref.model } : {}),
    ...(ref.keyId ? { keyId: ref.keyId } : {}),
    ...(ref.endUser ? { endUser: ref.endUser } : {}),
    ...(close.responseId !== undefined ? { responseId: close.responseId } : {}),
    ...(close.itemIds && close.itemIds.length > 0 ? { itemIds: close.itemIds } : {}),
  };
}

/** One admitted call's reservation, closed exactly once. */
export class Hold {
  #closed = false;

  constructor(
    readonly ref: HoldRef,
    private readonly onClose: (close: Close) => Promise<void>,
  ) {}

  /** A call served without a reservation (failOpen, authority unreachable): nothing to close. */
  static unmetered(ref: HoldRef): Hold {
    return new Hold(ref, () => Promise.resolve());
  }

  get reservationId(): string {
    return this.ref.reservationId;
  }

  get tenant(): string {
    return this.ref.tenant;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * `stored`: the response the upstream stored for the call and its output items, recorded as
   * the tenant's.
   */
  settle(
    usage: Usage,
    outcome: SettleOutcome,
    stored: { responseId?: string | undefined; itemIds?: string[] | undefined } = {},
  ): void {
    const { responseId, itemIds } = stored;
    this.#close({
      how: 'settle',
      usage,
      outcome,
      ...(responseId ? { responseId } : {}),
      ...(itemIds && itemIds.length > 0 ? { itemIds } : {}),
    });
  }

  /**
   * `answered`: the attempts its upstream answered with an error (requests it counted). The
   * release keeps the admission's request of them: each retry after an answered attempt took
   * its own request when it was made (capacity.retry), so naming it again would count it twice.
   */
  release(reason: ReleaseReason, answered?: number): void {
    this.#close({ how: 'release', reason, ...(answered ? { answeredRequests: 1 } : {}) });
  }

  #close(close: Close): void {
    if (this.#closed) return;
    this.#closed = true;
    void this.onClose(close);
  }
}
