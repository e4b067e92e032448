import type { ServerResponse } from 'node:http';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { onResponseGone } from './response-gone.js';

/**
 * Model API requests open on this edge, from the moment their headers are read until their
 * response closes: a call's body, its parse, its count and its whole call included. Decided on
 * the headers, before a body is read or parsed:
 *
 * - a tenant at its `maxInFlight` is refused;
 * - so is a request whose body would take the tenant's open bodies past `tenantBodyBytes`, or
 *   every tenant's past `bodyBytes`. A body is taken at its `content-length`, or at the body
 *   limit when it has none (chunked), and counted until its response closes: its parsed form
 *   lives as long as the call. Without these, a tenant with no `maxInFlight` could open as many
 *   bodies as it has connections, each up to the body limit, and run the edge out of memory for
 *   every tenant (docs/security.md, input limits).
 *
 * The same bounds cover what a streamed reply keeps waiting for a client that reads it slower
 * than the upstream writes (`OpenRequest.holdReply`): the edge reads every upstream at its own
 * pace, so without them a tenant's clients that stop reading could each leave up to
 * EDGE_STREAM_LAG_BYTES on the edge, as many times as it has connections.
 */
export interface OpenLimits {
  /** Body bytes one tenant may have open on this edge. */
  tenantBodyBytes: number;
  /** Body bytes every tenant together may have open on this edge. */
  bodyBytes: number;
  /** The largest body the edge reads (larger ones get 413). */
  bodyLimitBytes: number;
}

/** Why a request was refused on its headers. */
export type Refusal =
  | { why: 'in_flight'; cap: number }
  | { why: 'tenant_bytes'; cap: number }
  | { why: 'edge_bytes'; cap: number };

interface Open {
  requests: number;
  bytes: number;
}

/** One request counted open, until its response closes. */
export interface OpenRequest {
  /**
   * Counts `bytes` of its reply waiting on the edge for its client (instead of what was counted
   * before); false, and nothing changed, when more would take its tenant's open bytes, or the
   * edge's, past their bound.
   */
  holdReply(bytes: number): boolean;
}

export class OpenRequests {
  readonly #byTenant = new Map<string, Open>();
  #bytes = 0;

  constructor(private readonly limits: OpenLimits) {}

  /**
   * Counts the request until `res` closes; a refusal (and nothing counted) when it would take
   * the tenant past `cap` requests open here, or past a bound on open body bytes.
   */
  open(
    tenant: string,
    cap: number | undefined,
    contentLength: string | undefined,
    res: ServerResponse,
  ): Result<OpenRequest, Refusal> {
    const open = this.#byTenant.get(tenant) ?? { requests: 0, bytes: 0 };
    if (cap !== undefined && open.requests >= cap) return Err({ why: 'in_flight', cap });
    const body = this.#bodyBytes(contentLength);
    const refusal = this.#refusal(open, body);
    if (refusal) return Err(refusal);
    open.requests++;
    this.#byTenant.set(tenant, open);
    this.#add(open, body);
    let reply = 0;
    let gone = false;
    // Its connection's close too: a pipelined response whose client left while it waited for
    // its turn is never closed (response-gone.ts).
    onResponseGone(res, () => {
      open.requests--;
      gone = true;
      this.#add(open, -(body + reply));
      if (open.requests === 0) this.#byTenant.delete(tenant);
    });
    return Ok({
      holdReply: (bytes) => {
        if (gone) return false;
        const more = bytes - reply;
        if (more > 0 && this.#refusal(open, more)) return false;
        this.#add(open, more);
        reply = bytes;
        return true;
      },
    });
  }

  /** Body bytes open on this edge: every tenant's, or one's. */
  bytes(tenant?: string): number {
    return tenant === undefined ? this.#bytes : (this.#byTenant.get(tenant)?.bytes ?? 0);
  }

  /** Why `bytes` more may not be opened for a tenant with `open` (nothing when they may). */
  #refusal(open: Open, bytes: number): Refusal | undefined {
    const { tenantBodyBytes, bodyBytes } = this.limits;
    if (open.bytes + bytes > tenantBodyBytes) return { why: 'tenant_bytes', cap: tenantBodyBytes };
    if (this.#bytes + bytes > bodyBytes) return { why: 'edge_bytes', cap: bodyBytes };
    return undefined;
  }

  #add(open: Open, bytes: number): void {
    open.bytes += bytes;
    this.#bytes += bytes;
  }

  /**
   * What a body is taken at: its declared length, at most the body limit (a longer one is
   * refused with 413 once read starts); the body limit when it declares none.
   */
  #bodyBytes(contentLength: string | undefined): number {
    const limit = this.limits.bodyLimitBytes;
    if (contentLength === undefined || !/^\d{1,15}$/.test(contentLength)) return limit;
    return Math.min(Number(contentLength), limit);
  }
}
