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
  type CompletionLength,
  type FailNextInput,
  type FailureKind,
} from './behaviour.js';
export type { MockStats, Outcome, RequestRecord } from './state.js';
export { loadConfig } from './config.js';
export { prng } from './generate.js';
