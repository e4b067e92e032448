import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { REPO_ROOT } from '@holdfast/stack';

/** Variables of the caller that would point a tool elsewhere than the stack's stack.json. */
const TARGETING =
  /^(NATS_URL|REDIS_URL|CLICKHOUSE_URL|CLICKHOUSE_DATABASE|HOLDFAST_(URL|ADMIN_TOKEN|EDGE_URL|MOCK_URL|EVENTS_|AUTHORITY_))/;

export interface ToolRun {
  code: number;
  stdout: string;
  /** stdout and stderr together, for failure messages. */
  out: string;
}

/**
 * Runs a tool the way a user of the stack in `stackDir` does: `command` from the repository
 * root, with HOLDFAST_STACK_DIR and none of the variables that would override the stack.
 */
export function runTool(command: string, args: string[], stackDir: string): Promise<ToolRun> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !TARGETING.test(k)));
  return new Promise((done) => {
    const child = spawn(command, args, {
      cwd: REPO_ROOT,
      env: { ...env, HOLDFAST_STACK_DIR: stackDir, NO_COLOR: '1' },
    });
    let stdout = '';
    let out = '';
    child.stdout.on('data', (d: Buffer) => ((stdout += d.toString()), (out += d.toString())));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => done({ code: code ?? -1, stdout, out }));
  });
}

/** A built entry point of the repository, run with node. */
export const node = (entry: string, args: string[], stackDir: string) =>
  runTool(process.execPath, [resolve(REPO_ROOT, entry), ...args], stackDir);
