import { rm, writeFile } from 'node:fs/promises';
import { stateFile, type StackState } from '@holdfast/config';

/**
 * `<stack dir>/stack.json`, written once everything is ready and removed on a clean stop: where
 * a running `pnpm stack` is. Its schema and readers live in @holdfast/config (stack-state.ts),
 * so `holdfast`, the drift audit and `pnpm experiment` find the stack without this package.
 */
export { isAlive, readStackState, readStackStateFile, StackState } from '@holdfast/config';

export async function writeStackState(dir: string, state: StackState): Promise<void> {
  await writeFile(stateFile(dir), `${JSON.stringify(state, null, 2)}\n`);
}

export async function removeStackState(dir: string): Promise<void> {
  await rm(stateFile(dir), { force: true });
}
