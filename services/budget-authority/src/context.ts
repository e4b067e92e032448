import type { RedisClient } from './redis.js';
import type { Logger } from '@holdfast/runtime';
import type { ConfigStore } from './config-store.js';
import type { Keys } from './keys.js';
import type { AuthorityMetrics } from './metrics.js';

/** What every handler needs. Built once by the Authority. */
export interface HandlerContext {
  redis: RedisClient;
  keys: Keys;
  config: ConfigStore;
  logger: Logger;
  metrics: AuthorityMetrics;
  /** Epoch ms; injectable so tests move time instead of sleeping. */
  clock: () => number;
  /**
   * The `now` scripts are given: undefined in production, where every script reads Redis's
   * own clock (one time source for every replica); the test clock when one is injected.
   */
  scriptNow: () => number | undefined;
}
