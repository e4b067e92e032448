export { Authority } from './authority.js';
export { createRedis, slotOf } from './redis.js';
