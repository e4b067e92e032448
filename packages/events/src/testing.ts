/**
 * `@holdfast/events/testing`: the seeds of the tests (and benches) that hold a fast path equal
 * to zod. Not in the package's index, so no service loads them.
 */
export * from './examples.js';
export * from './odd-values.js';
