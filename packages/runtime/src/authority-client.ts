import {
  AdmitReply,
  CapacityCountReply,
  type CapacityCountRequest,
  CapacityMoveReply,
  type CapacityMoveRequest,
  CapacityRetryReply,
  type CapacityRetryRequest,
  CapacityReportReply,
  type CapacityReportRequest,
  CloseReply,
  ConfigApplyReply,
  ConfigGetReply,
  RefusalsReportReply,
  type RefusalsReportRequest,
  ExtendReply,
  RenewReply,
  SuspensionReply,
  UsageReply,
  type AdmitRequest,
  OwnsReply,
  type OwnsRequest,
  type AuthorityOperation,
  type BatchedOperation,
  type ConfigApplyRequest,
  type ExtendRequest,
  type NatsNames,
  type ReleaseRequest,
  type RenewRequest,
  type ResumeRequest,
  type SettleRequest,
  type SuspendRequest,
  type UsageRequest,
} from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import type { z } from 'zod';
import type { Result } from './errors.js';
import { RequestBatcher } from './request-batcher.js';
import { authoritySubject, request, type RpcError } from './rpc.js';

export interface AuthorityClientOptions {
  nc: NatsConnection;
  names: NatsNames;
  /** Per-request timeout, ms. */
  timeoutMs?: number;
  /**
   * Send the call path's requests (admit, extend, renew, settle, release) made in one turn of
   * the event loop as one `batch` message (RequestBatcher). For a process that asks for many
   * at once: the edge.
   */
  batch?: boolean;
}

/** Typed requests to the budget authority. Every reply is validated against its schema. */
export class AuthorityClient {
  readonly #nc: NatsConnection;
  readonly #names: NatsNames;
  readonly #timeoutMs: number;
  readonly #batcher: RequestBatcher | undefined;

  constructor(opts: AuthorityClientOptions) {
    this.#nc = opts.nc;
    this.#names = opts.names;
    this.#timeoutMs = opts.timeoutMs ?? 2_000;
    this.#batcher = opts.batch ? new RequestBatcher(opts.nc, opts.names) : undefined;
  }

  /** A call-path request: batched with others of this turn when the client batches. */
  #callPath<S extends z.ZodType>(
    op: BatchedOperation,
    body: unknown,
    schema: S,
    timeoutMs?: number,
  ): Promise<Result<z.output<S>, RpcError>> {
    if (!this.#batcher) return this.#call(op, body, schema, timeoutMs);
    return this.#batcher.request(op, body, schema, timeoutMs ?? this.#timeoutMs);
  }

  #call<S extends z.ZodType>(
    op: AuthorityOperation,
    body: unknown,
    schema: S,
    timeoutMs?: number,
  ): Promise<Result<z.output<S>, RpcError>> {
    return request(
      this.#nc,
      authoritySubject(this.#names, op),
      body,
      schema,
      timeoutMs ?? this.#timeoutMs,
    );
  }

  admit(req: AdmitRequest, timeoutMs?: number) {
    return this.#callPath('admit', req, AdmitReply, timeoutMs);
  }
  extend(req: ExtendRequest, timeoutMs?: number) {
    return this.#callPath('extend', req, ExtendReply, timeoutMs);
  }
  renew(req: RenewRequest, timeoutMs?: number) {
    return this.#callPath('renew', req, RenewReply, timeoutMs);
  }
  settle(req: SettleRequest, timeoutMs?: number) {
    return this.#callPath('settle', req, CloseReply, timeoutMs);
  }
  release(req: ReleaseRequest, timeoutMs?: number) {
    return this.#callPath('release', req, CloseReply, timeoutMs);
  }
  /** Whether the tenant owns the response and items a count names; read-only. */
  owns(req: OwnsRequest, timeoutMs?: number) {
    return this.#call('owns', req, OwnsReply, timeoutMs);
  }
  usage(req: UsageRequest = {}, timeoutMs?: number) {
    return this.#call('usage', req, UsageReply, timeoutMs);
  }
  suspend(req: SuspendRequest) {
    return this.#call('suspend', req, SuspensionReply);
  }
  resume(req: ResumeRequest) {
    return this.#call('resume', req, SuspensionReply);
  }
  reportCapacity(req: CapacityReportRequest) {
    return this.#call('capacity.report', req, CapacityReportReply, 1_000);
  }
  /** One request to the upstream's counting endpoint, taken of its `countsPerMinute`. */
  takeCount(req: CapacityCountRequest, timeoutMs?: number) {
    return this.#call('capacity.count', req, CapacityCountReply, timeoutMs);
  }

  /** Takes an admitted call's capacity of a fallback upstream, then gives back its first's. */
  moveCapacity(req: CapacityMoveRequest, timeoutMs?: number) {
    return this.#call('capacity.move', req, CapacityMoveReply, timeoutMs);
  }
  /** One more request of the upstream's capacity for a call retried there after an answer. */
  retryCapacity(req: CapacityRetryRequest, timeoutMs?: number) {
    return this.#call('capacity.retry', req, CapacityRetryReply, timeoutMs);
  }
  reportRefusals(req: RefusalsReportRequest, timeoutMs?: number) {
    return this.#call('refusals.report', req, RefusalsReportReply, timeoutMs);
  }
  configGet() {
    return this.#call('config.get', {}, ConfigGetReply);
  }
  configApply(req: ConfigApplyRequest) {
    return this.#call('config.apply', req, ConfigApplyReply, 10_000);
  }
}
