// The tenant document: its schema, rules, compiled form, loading and merging.
export * from './document/schema.js';
export * from './document/rules.js';
export * from './document/compile.js';
export * from './document/load.js';
export * from './document/fields.js';
export * from './document/paths.js';
export * from './document/merge.js';
export * from './document/limits.js';
export * from './document/tool-uses.js';
export {
  HIDDEN_INPUT_TOKENS,
  hiddenInputTokens,
  type HiddenInputTokens,
} from './document/hidden-input.js';
export { didYouMean } from './document/suggest.js';
// The environment every service reads, Redis targets, and where `pnpm stack` keeps its state.
export * from './env/env.js';
export * from './env/redis-env.js';
export * from './env/stack-state.js';
