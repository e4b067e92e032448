import type {
  AdmitReply,
  AdmitRequest,
  CloseReply,
  ExtendReply,
  CapacityMoveReply,
  CapacityRetryReply,
  ExtendRequest,
  OwnsReply,
  OwnsRequest,
  ReleaseRequest,
  RenewReply,
  SettleRequest,
} from '@holdfast/events';
import { AdmitRequest as AdmitSchema, SettleRequest as SettleSchema } from '@holdfast/events';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { z } from 'zod';
import type { AuthorityPort } from '../src/call/ports.js';

type Reply<T> = Promise<Result<T, RpcError>>;

/**
 * An in-memory budget authority for unit tests of the call pipeline (tests only: the real one
 * is the NATS client of services/budget-authority). One tokens budget, reserve mode: a call is
 * admitted when billed + held + prompt + max_tokens fits, its hold is the worst case, and a
 * settle bills what it reports. Every request is recorded (parsed, defaults applied), so a
 * test reads what the pipeline asked for; an `uncounted` admit (never admitted: refused when
 * its max_tokens alone does not fit, else `not_counted`) apart from the others.
 */
export class MemoryAuthority implements AuthorityPort {
  readonly admits: z.output<typeof AdmitSchema>[] = [];
  readonly uncounted: z.output<typeof AdmitSchema>[] = [];
  readonly settles: z.output<typeof SettleSchema>[] = [];
  readonly releases: ReleaseRequest[] = [];
  readonly extends: ExtendRequest[] = [];
  billed = 0;
  held = 0;
  readonly #holds = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** Owned: each id a settle of the tenant's recorded (responseId, itemIds), as the real one. */
  owns(req: OwnsRequest): Reply<OwnsReply> {
    const mine = new Set(
      this.settles
        .filter((s) => s.tenant === req.tenant)
        .flatMap((s) => [...(s.responseId ? [s.responseId] : []), ...(s.itemIds ?? [])]),
    );
    const { previousResponseId: response } = req;
    if (response && !mine.has(response)) {
      const message = `Previous response with id '${response}' not found.`;
      return Promise.resolve(Err(new RpcError({ code: 'response_not_found', message })));
    }
    const item = req.itemIds?.find((id) => !mine.has(id));
    if (item !== undefined) {
      const message = `Item with id '${item}' not found.`;
      return Promise.resolve(Err(new RpcError({ code: 'item_not_found', message })));
    }
    return Promise.resolve(Ok({ owned: true as const }));
  }

  admit(raw: AdmitRequest): Reply<AdmitReply> {
    const req = AdmitSchema.parse(raw);
    (req.uncounted ? this.uncounted : this.admits).push(req);
    const need = req.promptTokens + req.maxTokens;
    const window = {
      tenant: req.tenant,
      budget: 'month-tokens',
      window: 'month' as const,
      unit: 'tokens' as const,
      limit: this.limit,
      enforce: true,
    };
    if (this.billed + this.held + need > this.limit) {
      return Promise.resolve(
        Ok({
          admitted: false as const,
          code: 'budget_exceeded' as const,
          message: `This call could use up to ${need} tokens; ${this.limit - this.billed - this.held} are left.`,
          retryAfterSeconds: 30,
          budget: 'month-tokens',
          level: req.tenant,
          neededTokens: need,
          neededMicroUsd: 0,
          windows: [{ ...window, used: this.billed, held: this.held }],
        }),
      );
    }
    if (req.uncounted) {
      return Promise.resolve(Err(new RpcError({ code: 'not_counted', message: 'count it' })));
    }
    this.held += need;
    this.#holds.set(req.reservationId, need);
    return Promise.resolve(
      Ok({
        admitted: true as const,
        reservationId: req.reservationId,
        mode: 'reserve' as const,
        heldTokens: need,
        heldMicroUsd: 0,
        maxTokens: req.maxTokens,
        shrunk: false,
        expiresAt: new Date(Date.now() + 600_000).toISOString(),
        duplicate: false,
        coveredOutputTokens: req.maxTokens,
        windows: [{ ...window, used: this.billed, held: this.held }],
      }),
    );
  }

  extend(req: ExtendRequest): Reply<ExtendReply> {
    this.extends.push(req);
    return Promise.resolve(
      Ok({
        status: 'unchanged',
        heldTokens: 0,
        heldMicroUsd: 0,
        coveredOutputTokens: req.outputTokens,
        windows: [],
      }),
    );
  }

  /** No upstream declares capacity here: a fallback always has room. */
  moveCapacity(): Reply<CapacityMoveReply> {
    return Promise.resolve(Ok({ moved: true }));
  }

  /** No upstream declares capacity here: a retry always has room. */
  retryCapacity(): Reply<CapacityRetryReply> {
    return Promise.resolve(Ok({ taken: true }));
  }

  renew(): Reply<RenewReply> {
    return Promise.resolve(
      Ok({ status: 'renewed', expiresAt: new Date(Date.now() + 600_000).toISOString() }),
    );
  }

  settle(raw: SettleRequest): Reply<CloseReply> {
    const req = SettleSchema.parse(raw);
    this.settles.push(req);
    const billed = req.usage.promptTokens + req.usage.completionTokens;
    this.#close(req.reservationId);
    this.billed += billed;
    return Promise.resolve(Ok(this.#reply('settled', billed)));
  }

  release(req: ReleaseRequest): Reply<CloseReply> {
    this.releases.push(req);
    this.#close(req.reservationId);
    return Promise.resolve(Ok(this.#reply('released', 0)));
  }

  #close(id: string): void {
    this.held -= this.#holds.get(id) ?? 0;
    this.#holds.delete(id);
  }

  #reply(status: 'settled' | 'released', billed: number): CloseReply {
    return {
      status,
      billedTokens: billed,
      costMicroUsd: 0,
      windows: [],
      overrunTokens: 0,
      overrunMicroUsd: 0,
    };
  }
}
