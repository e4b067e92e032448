export {
  startMockUpstream,
  DEFAULT_PORT,
  type MockUpstream,
  type MockUpstreamOptions,
} from './server.js';
export {
  DEFAULT_BEHAVIOUR,
  FAILURES,
  parseCompletionSpec,
  type Behaviour,
  type BehaviourPatch,
  type Capacity,
  type CompletionLength,
  type FailNextInput,
  type FailureKind,
  type OverReport,
} from './behaviour.js';
export type { CapacityStats } from './capacity.js';
export type { MockStats, Outcome, RequestRecord, Route } from './state.js';
export { loadConfig } from './config.js';
export { prng } from './generate.js';
