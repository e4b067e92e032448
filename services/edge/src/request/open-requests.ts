import type { ServerResponse } from 'node:http';
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
  ): Refusal | undefined {
    const open = this.#byTenant.get(tenant) ?? { requests: 0, bytes: 0 };
    if (cap !== undefined && open.requests >= cap) return { why: 'in_flight', cap };
    const bytes = this.#bodyBytes(contentLength);
    const { tenantBodyBytes, bodyBytes } = this.limits;
    if (open.bytes + bytes > tenantBodyBytes) return { why: 'tenant_bytes', cap: tenantBodyBytes };
    if (this.#bytes + bytes > bodyBytes) return { why: 'edge_bytes', cap: bodyBytes };
    open.requests++;
    open.bytes += bytes;
    this.#bytes += bytes;
    this.#byTenant.set(tenant, open);
    // Its connection's close too: a pipelined response whose client left while it waited for
    // its turn is never closed (response-gone.ts).
    onResponseGone(res, () => {
      open.requests--;
      open.bytes -= bytes;
      this.#bytes -= bytes;
      if (open.requests === 0) this.#byTenant.delete(tenant);
    });
    return undefined;
  }

  /** Body bytes open on this edge: every tenant's, or one's. */
  bytes(tenant?: string): number {
    return tenant === undefined ? this.#bytes : (this.#byTenant.get(tenant)?.bytes ?? 0);
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
