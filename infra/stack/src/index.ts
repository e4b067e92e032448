export { DEFAULT_STACK_DIR, EXAMPLE_CONFIG, REPO_ROOT, loadSettings } from './env.js';
export { readStackState, stateFile, isAlive, StackState } from './state.js';
export { ProcessGroup, ManagedProcess, StartError, type ProcessSpec } from './process.js';
export { PROCESS_ORDER, startStack, type RunningStack } from './stack.js';
