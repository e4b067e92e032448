export { startMockUpstream, type MockUpstream, type MockUpstreamOptions } from './server.js';
export type { BehaviourPatch } from './behaviour.js';
export type { RequestRecord } from './state.js';
export { prng } from './generate.js';
