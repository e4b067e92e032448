export * from './policy.js';
export * from './retry.js';
export * from './sleep.js';
