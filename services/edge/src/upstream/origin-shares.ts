/**
 * Each tenant's share of the connections to an upstream origin.
 *
 * The edge keeps at most `EDGE_UPSTREAM_CONNECTIONS` connections to each origin (one undici
 * pool), and a call holds one for as long as its response streams: minutes, for a long
 * generation or a client that reads slowly. One tenant with that many calls in flight took
 * every connection, and every other tenant's calls to that origin waited in the pool's queue
 * behind its own: 256 streams of 24 s held another tenant's 3-token call for 24.8 s. A tenant
 * may now hold at most `perTenant` connections of an origin at once; past them its call is
 * refused (429 `concurrency_limit`, nothing sent), so the rest of the pool stays for everyone
 * else.
 */
export class OriginShares {
  /** Calls open by origin, then by tenant. */
  readonly #open = new Map<string, Map<string, number>>();

  constructor(readonly perTenant: number) {
    if (!(perTenant >= 1)) throw new RangeError('perTenant must be at least 1');
  }

  /**
   * Takes a connection of `origin` for `tenant`: the function that gives it back (once; later
   * calls do nothing), or undefined when the tenant already holds its share.
   */
  take(origin: string, tenant: string): (() => void) | undefined {
    let tenants = this.#open.get(origin);
    const open = tenants?.get(tenant) ?? 0;
    if (open >= this.perTenant) return undefined;
    if (!tenants) this.#open.set(origin, (tenants = new Map<string, number>()));
    tenants.set(tenant, open + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (tenants.get(tenant) ?? 1) - 1;
      if (left > 0) tenants.set(tenant, left);
      else tenants.delete(tenant);
      if (tenants.size === 0 && this.#open.get(origin) === tenants) this.#open.delete(origin);
    };
  }

  /** Connections a tenant holds at an origin. */
  held(origin: string, tenant: string): number {
    return this.#open.get(origin)?.get(tenant) ?? 0;
  }
}
