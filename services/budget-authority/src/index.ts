export { Authority, type AuthorityOptions } from './authority.js';
export { Keys } from './keys.js';
export { loadConfig, type AuthorityConfig, type AuthorityEnv } from './config.js';
export { createRedis, slotOf, type RedisClient } from './redis.js';
export { start, type AuthorityDeps, type StartedAuthority } from './service.js';
