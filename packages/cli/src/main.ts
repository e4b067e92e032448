#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { readAdminToken, readStackState, stackDir } from '@holdfast/config';
import { run } from './cli.js';

/** The `holdfast` binary: one command, its exit code, nothing left running. */
const code = await run(process.argv.slice(2), {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  readFile: (path) => readFile(path, 'utf8'),
  onInterrupt: (stop) => {
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  },
  stack: () => {
    const dir = stackDir(process.env);
    return { dir, state: readStackState(dir), adminToken: readAdminToken(dir) };
  },
}).catch((err: unknown) => {
  process.stderr.write(`holdfast: unexpected error: ${String(err)}\n`);
  return 1;
});
process.exitCode = code;
