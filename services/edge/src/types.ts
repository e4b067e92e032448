import type { AuthorityClient } from '@holdfast/runtime';
import type { TokenCounter } from '@holdfast/tokenizer';
import type { Caller } from './request/auth.js';
import type { OpenRequest } from './request/open-requests.js';
import type { Calls } from './call/in-flight.js';
import type { EdgeOptions } from './env.js';
import type { ConfigSnapshot } from './authority/config-snapshot.js';
import type { Holds } from './authority/holds.js';
import type { RefusalMemory } from './authority/refusal-memory.js';
import type { EdgeMetrics } from './metrics.js';
import type { UpstreamClient } from './upstream/client.js';

/** Fields of a request's one summary log line (and its metrics labels). */
export interface Audit {
  tenant?: string;
  keyId?: string | null;
  /** The call's end user (as Holdfast keys it), when it named one. */
  endUser?: string;
  useCase?: string;
  model?: string;
  reservationId?: string;
  promptTokens?: number;
  maxTokens?: number;
  completionTokens?: number;
  outcome?: string;
  /** The error code answered, if any. */
  code?: string;
}

/** Whose error body a route answers with. */
export type ErrorShape = 'openai' | 'anthropic';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The error body of the route's API (default `openai`). */
    errorShape?: ErrorShape;
  }
  interface FastifyInstance {
    edgeOptions: EdgeOptions;
    metrics: EdgeMetrics;
    authority: AuthorityClient;
    configSnapshot: ConfigSnapshot;
    holds: Holds;
    refusals: RefusalMemory;
    calls: Calls;
    counter: TokenCounter;
    upstream: UpstreamClient;
  }
  interface FastifyRequest {
    /** Set by the auth hook on /v1 routes. */
    caller: Caller | null;
    /** Set by the same hook on a model API's POST: what it keeps open on the edge. */
    open: OpenRequest | null;
    audit: Audit;
  }
}
