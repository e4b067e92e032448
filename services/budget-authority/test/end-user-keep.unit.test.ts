import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { END_USER_KEEP_MS } from '../src/script-args.js';

/**
 * The scripts keep an end user's windows and registries END_USER_KEEP_MS past its last
 * admission from lib.lua's own constant (no longer an argument of every admit and close), and
 * rebuild and usage read the TypeScript one: they are one value.
 */
test("lib.lua's END_USER_KEEP_MS and its text are script-args.ts's", () => {
  const lib = readFileSync(new URL('../src/lua/lib.lua', import.meta.url), 'utf8');
  expect(/^local END_USER_KEEP_MS = (\d+)$/m.exec(lib)?.[1]).toBe(String(END_USER_KEEP_MS));
  expect(/^local END_USER_KEEP_TEXT = '(\d+)'$/m.exec(lib)?.[1]).toBe(String(END_USER_KEEP_MS));
});
