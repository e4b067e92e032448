export { Authority, type AuthorityOptions } from './authority.js';
export { Keys } from './keys.js';
export { loadEnv, type AuthorityEnv } from './config.js';
export { createRedis } from './redis.js';
