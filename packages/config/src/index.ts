export * from './schema.js';
export * from './rules.js';
export * from './compile.js';
export * from './load.js';
export * from './env.js';
export * from './paths.js';
export * from './merge.js';
export * from './stack-state.js';
export { didYouMean } from './suggest.js';
