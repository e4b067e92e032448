export { EXAMPLE_CONFIG, REPO_ROOT, loadSettings } from './env.js';
export { readStackState, isAlive, StackState } from './state.js';
export { ProcessGroup, type ProcessSpec } from './process.js';
export { PROCESS_ORDER, startStack } from './stack.js';
