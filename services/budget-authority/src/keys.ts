/**
 * Redis key layout. Every key of one org (the root of a tenant hierarchy) carries the org in a
 * hash tag, `{org}`, so on Redis Cluster a whole tree lives in one hash slot and one Lua script
 * can check and charge every level atomically.
 *
 *   <p>:{<org>}:t:<tenant>:state         hash: suspended, billedT, billedU (lifetime)
 *   <p>:{<org>}:t:<tenant>:holds         zset: reservation id -> lease expiry (ms); the org's
 *                                        own (`t:<org>:holds`, the root level's) holds every
 *                                        live hold of the org whatever tenant it belongs to
 *                                        now: it is the org's lease index (the sweeper's)
 *   <p>:{<org>}:t:<tenant>:w:<budget>    hash: s (billed in window), h (held), p (overrun
 *                                        adaptive calls could still make), lo, b<bucket>
 *   <p>:{<org>}:t:<tenant>:out:<uc>:<m>  list: recent completion sizes (adaptive mode)
 *   <p>:{<org>}:k:<tenant>:<key>:w:<budget>   hash: a key's own window (same layout)
 *   <p>:{<org>}:u:<tenant>:<user>:w:<budget>  hash: an end user's window (same layout;
 *                                        expires when the end user stops calling)
 *   <p>:{<org>}:t:<tenant>:users         zset: end users with budgets -> last seen (ms)
 *   <p>:{<org>}:k:<tenant>:<key>:users   zset: the end users a key with a maxEndUsers named
 *                                        -> when it last did (ms; expires 31 days after)
 *   <p>:{<org>}:r:<reservation>          hash: the hold record
 *   <p>:{<org>}:leases                   zset: the lease index before it was the root level's
 *                                        in-flight set (issue 14): only authorities before that
 *                                        write it; the sweeper drains what they left (legacyLeases)
 *   <p>:{<org>}:refusals                 hash: rate-limited refusals by kind, not yet evented
 *   <p>:{<org>}:rr:<report item>         string: an edge's refusal report item counted (10 min,
 *                                        so a retried report counts nothing twice)
 *   <p>:{<org>}:outbox                   stream: events not yet on JetStream
 *   <p>:{<org>}:relay                    string: which replica relays this org's outbox
 *   <p>:{<org>}:ro:<response id>         string: the tenant that owns a response the upstream
 *                                        stored (30 days, as OpenAI keeps it); not budget state
 *
 * The files a call's code execution output made (Anthropic's Files API, shared by every team of
 * the upstream account) are owned across orgs, in a slot of their own, `{_files}` (no org id
 * starts with '_'), read only by an admit that names a file:
 *
 *   <p>:{_files}:fo:<file id>            string: the tenant whose call's output made the file,
 *                                        or first got the sealed content `ec_<sha256>`
 *                                        (firstOwned; FILE_OWNER_TTL_MS); not budget state
 *
 * The keys of no org share the system org's tag, `{_system}`, so the config apply script (the
 * document, its version, the declared record, the org registry and the config.changed event in
 * the system outbox) stays in one slot on Redis Cluster too:
 *
 *   <p>:{_system}:config, ...:config:version   the applied config document and its version
 *   <p>:{_system}:config:declared        hash: the last declared document (file or apply)
 *                                        and its hash, the base of the next merge
 *   <p>:{_system}:config:file            string: hash and path of the config file last applied
 *   <p>:{_system}:orgs                   set: every org that ever had an outbox
 *
 * Before the tag these were `<p>:config...` and `<p>:orgs`; `legacyGlobalKeys` names them so
 * a single Redis written by an older authority is moved over at start (migrate.ts).
 */
export class Keys {
  constructor(readonly prefix: string) {}

  #org(org: string): string {
    return `${this.prefix}:{${org}}`;
  }
  state(org: string, tenant: string): string {
    return `${this.#org(org)}:t:${tenant}:state`;
  }
  holds(org: string, tenant: string): string {
    return `${this.#org(org)}:t:${tenant}:holds`;
  }
  window(org: string, tenant: string, budgetId: string): string {
    return `${this.#org(org)}:t:${tenant}:w:${budgetId}`;
  }
  /** One key's own budget window (a key with budgets of its own). */
  keyWindow(org: string, tenant: string, keyId: string, budgetId: string): string {
    return `${this.#org(org)}:k:${tenant}:${keyId}:w:${budgetId}`;
  }
  /** One end user's budget window. */
  userWindow(org: string, tenant: string, endUser: string, budgetId: string): string {
    return `${this.#org(org)}:u:${tenant}:${endUser}:w:${budgetId}`;
  }
  /** The tenant's end users with budgets, by when each was last seen (ms). */
  users(org: string, tenant: string): string {
    return `${this.#org(org)}:t:${tenant}:users`;
  }
  /**
   * The tenant's end users as a Bloom filter (admit.lua trackedFilter), kept until one is
   * added to `users` (every writer of it deletes this).
   */
  usersFilter(org: string, tenant: string): string {
    return `${this.users(org, tenant)}:filter`;
  }
  /** The end users one key named (those it has a `maxEndUsers` for), by when it last did (ms). */
  keyUsers(org: string, tenant: string, keyId: string): string {
    return `${this.#org(org)}:k:${tenant}:${keyId}:users`;
  }
  /** Recent completion sizes of one use case and model (adaptive mode). */
  samples(org: string, tenant: string, useCase: string, model: string): string {
    return `${this.#org(org)}:t:${tenant}:out:${useCase}:${model}`;
  }
  reservation(org: string, id: string): string {
    return `${this.#org(org)}:r:${id}`;
  }
  /**
   * Every live hold of the org by lease expiry, so expiry finds holds of removed tenants: the
   * root level's in-flight set, which every admission of the org adds to (the org is the last
   * level of every chain in its tag), so one ZADD an admit and one ZREM a close keep both.
   */
  leases(org: string): string {
    return this.holds(org, org);
  }
  /**
   * The lease index as authorities before issue 14's cut kept it, beside the root's set (same
   * members, same scores): read and drained by the sweeper, written by no current script.
   */
  legacyLeases(org: string): string {
    return `${this.#org(org)}:leases`;
  }
  /** Refusals an admission rate-limited, counted by kind until the sweeper events them. */
  refusals(org: string): string {
    return `${this.#org(org)}:refusals`;
  }
  /** Marks one item of an edge's refusal report counted (refuse.lua with a count). */
  refusalReport(org: string, id: string): string {
    return `${this.#org(org)}:rr:${id}`;
  }
  /**
   * An upstream's capacity window (or a model's on it). Tagged by the upstream, not an org:
   * tenants of every org share it, so it is a second slot beside the org's (docs/budgets.md).
   */
  capacity(upstream: string, model: string | null): string {
    const base = `${this.prefix}:{cap:${upstream}}`;
    return model === null ? `${base}:w` : `${base}:m:${model}:w`;
  }
  /** One tenant's own use of an upstream's capacity window (`capacity.tenantShare`). */
  capacityTenant(upstream: string, model: string | null, tenant: string): string {
    return `${this.capacity(upstream, model)}:t:${tenant}`;
  }
  /** An upstream's counting window (`countsPerMinute`), and one tenant's use of it. */
  countCapacity(upstream: string, tenant?: string): string {
    const base = `${this.prefix}:{cap:${upstream}}:c:w`;
    return tenant === undefined ? base : `${base}:t:${tenant}`;
  }
  /** What one reservation took of an upstream's capacity (kept two minutes). */
  capacityRecord(upstream: string, reservationId: string): string {
    return `${this.prefix}:{cap:${upstream}}:r:${reservationId}`;
  }
  /**
   * The tenant that owns a stored Responses response (the one whose call stored it): only its
   * calls may continue it. In the org's slot, where the admit of a call of the org reads it.
   */
  responseOwner(org: string, responseId: string): string {
    return `${this.#org(org)}:ro:${responseId}`;
  }
  /**
   * The tenant whose call's code execution output made a file (Anthropic's Files API): one
   * slot for every org, since a team of any org may name it.
   */
  fileOwner(fileId: string): string {
    return `${this.prefix}:{${FILES_TAG}}:fo:${fileId}`;
  }
  /** A response or file owner key (kept by a rebuild: no event says who owns either). */
  isResponseOwner(key: string): boolean {
    return (
      (key.startsWith(`${this.prefix}:{`) &&
        /^[^}]*\}:ro:/.test(key.slice(this.prefix.length + 2))) ||
      key.startsWith(`${this.prefix}:{${FILES_TAG}}:fo:`)
    );
  }
  outbox(org: string): string {
    return `${this.#org(org)}:outbox`;
  }
  relayLock(org: string): string {
    return `${this.#org(org)}:relay`;
  }
  get #system(): string {
    return `${this.prefix}:{${SYSTEM_ORG}}`;
  }
  get config(): string {
    return `${this.#system}:config`;
  }
  get configVersion(): string {
    return `${this.#system}:config:version`;
  }
  get configDeclared(): string {
    return `${this.#system}:config:declared`;
  }
  get configFile(): string {
    return `${this.#system}:config:file`;
  }
  get orgs(): string {
    return `${this.#system}:orgs`;
  }
  /** The keys of no org that are not budget state (what a rebuild keeps). */
  isGlobal(key: string): boolean {
    return key.startsWith(`${this.#system}:config`) || key === this.orgs;
  }
  /** [old, new] names of the keys of no org from before they shared the `{_system}` tag. */
  get legacyGlobalKeys(): [string, string][] {
    const p = this.prefix;
    return [
      [`${p}:config`, this.config],
      [`${p}:config:version`, this.configVersion],
      [`${p}:config:declared`, this.configDeclared],
      [`${p}:config:file`, this.configFile],
      [`${p}:orgs`, this.orgs],
    ];
  }
}

/** The hash tag of the file owners (no org: an org id never starts with '_'). */
const FILES_TAG = '_files';

/** The pseudo-org whose outbox carries events of no tenant (config.changed). */
export const SYSTEM_ORG = '_system';
