import { createHmac, randomBytes } from 'node:crypto';
import { env } from '@holdfast/config';
import { loadServiceConfig, serviceEnv } from '@holdfast/runtime';
import { z } from 'zod';

/** The edge's environment. Every outbound call has a timeout here or in the config file. */
const EdgeEnv = serviceEnv({
  /** HTTP port of the OpenAI-compatible API and of /healthz, /readyz, /metrics. */
  EDGE_PORT: env.port(8080),
  EDGE_HOST: env.string('0.0.0.0'),
  /** Largest request body, bytes; larger ones get 413 invalid_request. */
  EDGE_BODY_LIMIT_BYTES: env.int(10 * 1024 * 1024, 1_024, 512 * 1024 * 1024),
  /** How long an admission may take before the call fails closed (503) or open (failOpen). */
  EDGE_ADMIT_TIMEOUT_MS: env.int(1_000, 10, 60_000),
  /** Timeout of one settle/release request; they are retried with backoff. */
  EDGE_SETTLE_TIMEOUT_MS: env.int(2_000, 10, 60_000),
  /** Attempts of a settle/release before it is handed to the closes stream for the authority. */
  EDGE_SETTLE_ATTEMPTS: env.int(8, 1, 100),
  /**
   * Send the admits, settles and releases asked for in one turn of the event loop as one NATS
   * message (fewer messages per call under load); 0 sends each alone.
   */
  EDGE_AUTHORITY_BATCH: env.bool(true),
  /**
   * After the authority refuses a call for its budget, the edge answers the same call (same
   * caller, model and surface, no smaller prompt or max_tokens) itself for this long, at most
   * the Retry-After it gave and until a call of the org closes on this edge; each such refusal
   * is still counted into an admission.refused event (EDGE_REFUSAL_REPORT_MS). 0: every call
   * goes to the authority.
   */
  EDGE_REFUSAL_MEMORY_MS: env.int(1_000, 0, 60_000),
  /**
   * How often the refusals the edge answered itself are reported to the authority; each one is
   * answered once its report is recorded, so an edge that dies loses none of them.
   */
  EDGE_REFUSAL_REPORT_MS: env.int(50, 1, 10_000),
  /** How often to poll the authority for a new config (a NATS notice usually comes first). */
  EDGE_CONFIG_POLL_MS: env.int(5_000, 50, 600_000),
  /**
   * How much of a streamed reply may wait for its client, bytes. The edge reads every upstream
   * at the upstream's pace (the provider bills what it writes, read or not) and keeps what the
   * client has not taken yet; a client further behind than this is too slow, and its
   * connection is closed (the call billed what the upstream wrote until then).
   */
  EDGE_STREAM_LAG_BYTES: env.int(1024 * 1024, 64 * 1024, 1024 * 1024 * 1024),
  /**
   * How long a streaming client's response head and opening events may be held back waiting
   * for the reply to begin (so an error the provider sends before it can be retried), ms.
   * Past it they are sent (a proxy's idle timeout must not cut a long hidden reasoning), and an
   * error in the stream is no longer retried.
   */
  EDGE_STREAM_HOLD_BACK_MS: env.int(5_000, 0, 600_000),
  /** TCP connect timeout towards an upstream. */
  EDGE_UPSTREAM_CONNECT_TIMEOUT_MS: env.int(5_000, 10, 600_000),
  /** Time from sending a request to the upstream's response headers. */
  EDGE_UPSTREAM_FIRST_BYTE_TIMEOUT_MS: env.int(60_000, 10, 3_600_000),
  /** Longest silence between two chunks of an upstream stream. */
  EDGE_UPSTREAM_IDLE_TIMEOUT_MS: env.int(60_000, 10, 3_600_000),
  /** First retry backoff; doubles each attempt, with full jitter. */
  EDGE_RETRY_BASE_MS: env.int(250, 0, 60_000),
  /** Largest backoff between two attempts. */
  EDGE_RETRY_MAX_MS: env.int(4_000, 0, 600_000),
  /** A Retry-After longer than this is not waited for: next upstream, or 429 to the client. */
  EDGE_RETRY_AFTER_CAP_MS: env.int(10_000, 0, 600_000),
  /**
   * Connections the edge keeps to each upstream origin at most; calls past them wait in the
   * pool's queue for one. Each streaming call holds one until its response has been read.
   */
  EDGE_UPSTREAM_CONNECTIONS: env.int(1_024, 1, 65_536),
  /**
   * The share, percent, of an origin's connections one tenant's calls may hold at once; past
   * it the tenant's call is refused (429 concurrency_limit, nothing sent), so one tenant's
   * long streams cannot leave every other tenant's calls waiting for a connection.
   */
  EDGE_UPSTREAM_TENANT_SHARE_PERCENT: env.int(50, 1, 100),
  /**
   * Bearer token of the admin API (`/admin`) and of the status page for admins. Unset: the
   * admin API answers 404 admin_disabled. At least 16 printable characters.
   */
  EDGE_ADMIN_TOKEN: z
    .string()
    .regex(/^[\x21-\x7e]{16,512}$/, 'must be 16 to 512 printable characters, no spaces')
    .optional(),
  /**
   * Who may see `GET /budgets` and `GET /v1/budgets`: `token` (the admin token sees every
   * tenant, a virtual key its own) or `open` (anyone who reaches the edge sees every tenant;
   * for internal networks). A virtual key is always limited to its own tenant.
   */
  EDGE_STATUS_PAGE: z.enum(['token', 'open']).default('token'),
  /** How often the status page refreshes its bars, ms. */
  EDGE_STATUS_REFRESH_MS: env.int(2_000, 100, 600_000),
  /**
   * Key that signs status page sessions (at least 32 characters; every edge replica the same).
   * Unset: derived from EDGE_ADMIN_TOKEN, else random per process (sessions then end when the
   * edge restarts and hold on that replica only).
   */
  EDGE_SESSION_SECRET: z
    .string()
    .regex(/^[\x21-\x7e]{32,512}$/, 'must be 32 to 512 printable characters')
    .optional(),
  /** `auto`: session cookies are Secure when the page came over https; or `always` / `never`. */
  EDGE_COOKIE_SECURE: z.enum(['auto', 'always', 'never']).default('auto'),
  /**
   * Behind a proxy: trust its X-Forwarded-For / X-Forwarded-Proto (`true`, or a comma-separated
   * list of proxy addresses or CIDRs). Needed for https detection and per-client limits.
   */
  EDGE_TRUST_PROXY: z.string().max(1_000).optional(),
  /** Sign-in attempts on the status page per client and minute. */
  EDGE_SIGN_IN_PER_MINUTE: env.int(10, 1, 10_000),
  /**
   * A request's headers and body must have arrived within this long, else the connection is
   * closed (a body sent a byte at a time cannot hold a socket). The response is not limited.
   */
  EDGE_REQUEST_TIMEOUT_MS: env.int(30_000, 100, 3_600_000),
  /**
   * Client connections the edge keeps open at once; one past it is closed as it is accepted
   * (0: no bound). Keeps file descriptors for the edge's own sockets (upstreams, NATS) whatever
   * clients open: a process out of them fails every tenant's calls.
   */
  EDGE_MAX_CONNECTIONS: env.int(10_000, 0, 1_000_000),
  /**
   * Characters of prompts one tenant may have waiting or being counted in the edge's worker
   * pool; a call past it gets 429 concurrency_limit (one count is always taken). The default,
   * 32 Mi, is about three bodies at the 10 MiB limit and seconds of counting.
   */
  EDGE_COUNT_QUEUE_CHARS: env.int(32 * 1024 * 1024, 1_000, 1_073_741_824),
  /**
   * Longest a prompt count may run in a worker; a count past it (text a tokenizer is very slow
   * on) stops its worker and is counted with the `estimate` bound instead.
   */
  EDGE_COUNT_TIMEOUT_MS: env.int(10_000, 100, 600_000),
  /**
   * Request bodies up to this many bytes are parsed as they arrive; larger ones wait for a turn
   * on the event loop, shared fairly between tenants (docs/security.md, input limits).
   */
  EDGE_INTAKE_INLINE_BYTES: env.int(64 * 1024, 0, 1_073_741_824),
  /** The share of the event loop, percent, that the turns of large bodies may take. */
  EDGE_INTAKE_SHARE_PERCENT: env.int(25, 1, 100),
  /**
   * Request bodies one tenant may have open on this edge, bytes: a body counts at its
   * content-length (the body limit when it has none) from its headers until its response
   * closes; past it, 429 `concurrency_limit` on the headers. Bounds the memory one tenant's
   * bodies take whatever its `maxInFlight` (docs/security.md, input limits).
   */
  EDGE_TENANT_OPEN_BODY_BYTES: env.int(128 * 1024 * 1024, 1_024, 68_719_476_736),
  /** Request bodies every tenant together may have open on this edge, bytes (as above). */
  EDGE_OPEN_BODY_BYTES: env.int(512 * 1024 * 1024, 1_024, 68_719_476_736),
}).superRefine((e, ctx) => {
  // A body the edge would read must fit under both bounds on open bodies, or it never could.
  const bounds = [
    ['EDGE_TENANT_OPEN_BODY_BYTES', e.EDGE_TENANT_OPEN_BODY_BYTES],
    ['EDGE_OPEN_BODY_BYTES', e.EDGE_OPEN_BODY_BYTES],
  ] as const;
  for (const [name, bytes] of bounds) {
    if (bytes < e.EDGE_BODY_LIMIT_BYTES) {
      ctx.addIssue({
        code: 'custom',
        path: [name],
        message: `must be at least EDGE_BODY_LIMIT_BYTES (${e.EDGE_BODY_LIMIT_BYTES})`,
      });
    }
  }
});
type EdgeEnv = z.infer<typeof EdgeEnv>;

/** The tunables the app reads, derived from the environment (tests build them directly). */
export interface EdgeOptions {
  bodyLimitBytes: number;
  admitTimeoutMs: number;
  settleTimeoutMs: number;
  settleAttempts: number;
  /** Batch the call path's authority requests (EDGE_AUTHORITY_BATCH). */
  authorityBatch: boolean;
  /** The edge's memory of budget refusals (EDGE_REFUSAL_*; authority/refusal-memory.ts). */
  refusals: { memoryMs: number; reportMs: number };
  configPollMs: number;
  /** The admin API's bearer token; undefined: the admin API is disabled. */
  adminToken: string | undefined;
  statusAccess: 'token' | 'open';
  statusRefreshMs: number;
  /** Signs status page sessions. */
  sessionSecret: Buffer;
  cookieSecure: 'auto' | 'always' | 'never';
  /** fastify's trustProxy. */
  trustProxy: boolean | string[];
  signInPerMinute: number;
  requestTimeoutMs: number;
  /** Client connections open at once (EDGE_MAX_CONNECTIONS); 0: no bound. */
  maxConnections: number;
  /** Prompt counting in the worker pool (EDGE_COUNT_*). */
  counting: { queueChars: number; timeoutMs: number };
  /** Large bodies' turns on the event loop (EDGE_INTAKE_*; request/intake.ts). */
  intake: { inlineBytes: number; share: number };
  /** Bounds on the request bodies open on this edge (EDGE_*OPEN_BODY_BYTES; request/open-requests.ts). */
  openBodies: { tenantBodyBytes: number; bodyBytes: number };
  /** Replicas of the closes stream when the edge is the first to create it. */
  streamReplicas: number;
  /** What a streamed reply may keep waiting for its client (EDGE_STREAM_LAG_BYTES). */
  streamLagBytes: number;
  /** How long a stream's head waits for the reply to begin (EDGE_STREAM_HOLD_BACK_MS). */
  streamHoldBackMs: number;
  upstream: UpstreamTimeouts & UpstreamRetry & UpstreamPool;
}

/** The connections to each upstream origin and one tenant's share of them. */
interface UpstreamPool {
  connections: number;
  /** (0, 1]. */
  tenantShare: number;
}

export interface UpstreamTimeouts {
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
}

/** How the edge retries an upstream that answered 429/5xx (its env names, ms). */
export interface UpstreamRetry {
  retryBaseMs: number;
  retryMaxMs: number;
  retryAfterCapMs: number;
}

export const DEFAULT_OPTIONS: EdgeOptions = optionsFromEnv(EdgeEnv.parse({}));

function optionsFromEnv(e: EdgeEnv): EdgeOptions {
  return {
    bodyLimitBytes: e.EDGE_BODY_LIMIT_BYTES,
    admitTimeoutMs: e.EDGE_ADMIT_TIMEOUT_MS,
    settleTimeoutMs: e.EDGE_SETTLE_TIMEOUT_MS,
    settleAttempts: e.EDGE_SETTLE_ATTEMPTS,
    authorityBatch: e.EDGE_AUTHORITY_BATCH,
    refusals: { memoryMs: e.EDGE_REFUSAL_MEMORY_MS, reportMs: e.EDGE_REFUSAL_REPORT_MS },
    configPollMs: e.EDGE_CONFIG_POLL_MS,
    adminToken: e.EDGE_ADMIN_TOKEN,
    statusAccess: e.EDGE_STATUS_PAGE,
    statusRefreshMs: e.EDGE_STATUS_REFRESH_MS,
    sessionSecret: sessionSecret(e),
    cookieSecure: e.EDGE_COOKIE_SECURE,
    trustProxy: trustProxy(e.EDGE_TRUST_PROXY),
    signInPerMinute: e.EDGE_SIGN_IN_PER_MINUTE,
    requestTimeoutMs: e.EDGE_REQUEST_TIMEOUT_MS,
    maxConnections: e.EDGE_MAX_CONNECTIONS,
    counting: { queueChars: e.EDGE_COUNT_QUEUE_CHARS, timeoutMs: e.EDGE_COUNT_TIMEOUT_MS },
    intake: { inlineBytes: e.EDGE_INTAKE_INLINE_BYTES, share: e.EDGE_INTAKE_SHARE_PERCENT / 100 },
    openBodies: {
      tenantBodyBytes: e.EDGE_TENANT_OPEN_BODY_BYTES,
      bodyBytes: e.EDGE_OPEN_BODY_BYTES,
    },
    streamReplicas: e.HOLDFAST_STREAM_REPLICAS,
    streamLagBytes: e.EDGE_STREAM_LAG_BYTES,
    streamHoldBackMs: e.EDGE_STREAM_HOLD_BACK_MS,
    upstream: {
      connectTimeoutMs: e.EDGE_UPSTREAM_CONNECT_TIMEOUT_MS,
      firstByteTimeoutMs: e.EDGE_UPSTREAM_FIRST_BYTE_TIMEOUT_MS,
      idleTimeoutMs: e.EDGE_UPSTREAM_IDLE_TIMEOUT_MS,
      retryBaseMs: e.EDGE_RETRY_BASE_MS,
      retryMaxMs: e.EDGE_RETRY_MAX_MS,
      retryAfterCapMs: e.EDGE_RETRY_AFTER_CAP_MS,
      connections: e.EDGE_UPSTREAM_CONNECTIONS,
      tenantShare: e.EDGE_UPSTREAM_TENANT_SHARE_PERCENT / 100,
    },
  };
}

function sessionSecret(e: EdgeEnv): Buffer {
  if (e.EDGE_SESSION_SECRET) return Buffer.from(e.EDGE_SESSION_SECRET);
  if (e.EDGE_ADMIN_TOKEN) {
    return createHmac('sha256', e.EDGE_ADMIN_TOKEN).update('holdfast status sessions').digest();
  }
  return randomBytes(32);
}

function trustProxy(value: string | undefined): boolean | string[] {
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  return value.split(',').map((s) => s.trim());
}

/** Parses the environment; throws an EnvError that names each bad variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env) {
  return loadServiceConfig(EdgeEnv, source, (e) => ({
    opsPort: e.EDGE_PORT,
    options: optionsFromEnv(e),
  }));
}
export type EdgeConfig = ReturnType<typeof loadConfig>;
