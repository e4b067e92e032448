export * from './policy.js';
export * from './retry.js';
