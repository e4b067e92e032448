import type { CompiledConfig } from '@holdfast/config';
import type { TokenCounter } from '@holdfast/tokenizer';
import type { FastifyInstance } from 'fastify';
import type { Calls } from './in-flight.js';
import type { EdgeOptions } from '../env.js';
import type { Holds } from '../authority/holds.js';
import type { RefusalMemory } from '../authority/refusal-memory.js';
import type { EdgeMetrics } from '../metrics.js';
import type { UpstreamClient } from '../upstream/client.js';
import type { AuthorityPort } from './ports.js';

/** Everything the call pipeline uses, passed explicitly (tests build their own). */
export interface CallDeps {
  authority: AuthorityPort;
  holds: Holds;
  /** The edge's memory of budget refusals (absent: every call asks the authority). */
  refusals?: RefusalMemory | undefined;
  calls: Calls;
  upstream: Pick<UpstreamClient, 'open' | 'count'>;
  counter: Pick<TokenCounter, 'countChat' | 'count'>;
  metrics: EdgeMetrics;
  options: EdgeOptions;
  /** The applied config (undefined until the first one is loaded). */
  config: () => CompiledConfig | undefined;
  /** Fetches the config again (a model the authority knows but this copy does not). */
  refreshConfig: () => Promise<unknown>;
  /** The version of that config (sent with each admit); absent in tests that build their own. */
  configVersion?: () => number;
}

/** The pipeline's dependencies from the edge app's decorations. */
export function callDeps(app: FastifyInstance): CallDeps {
  return {
    authority: app.authority,
    holds: app.holds,
    refusals: app.refusals,
    calls: app.calls,
    upstream: app.upstream,
    counter: app.counter,
    metrics: app.metrics,
    options: app.edgeOptions,
    config: () => app.configSnapshot.current,
    refreshConfig: () => app.configSnapshot.refresh(),
    configVersion: () => app.configSnapshot.version,
  };
}
