import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

/**
 * Every environment variable the code reads is in docs/configuration.md: the keys of the env
 * schemas (`sharedEnv`, each service's `env.ts`, the config package's helpers) and any
 * `process.env.NAME` in product code. A variable added without its line there fails here.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Product source files: `src` of every service and package but the test kit, no tests. */
function sources(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.ts$/.test(e.name) && !/\.test\.ts$/.test(e.name)) files.push(p);
    }
  };
  for (const group of ['services', 'packages']) {
    for (const name of readdirSync(join(ROOT, group))) {
      if (name === 'testkit') continue;
      const src = join(ROOT, group, name, 'src');
      try {
        walk(src);
      } catch {
        // a package without src
      }
    }
  }
  return files;
}

/** A key of an env schema: `  NAME: env.int(...)` in a file that builds one. */
const SCHEMA_KEY = /^\s+([A-Z][A-Z0-9_]{2,}):\s/gm;
const PROCESS_ENV = /process\.env(?:\.([A-Z][A-Z0-9_]*)|\[\s*'([A-Z][A-Z0-9_]*)'\s*\])/g;

function variablesRead(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sources()) {
    const text = readFileSync(file, 'utf8');
    const where = file.slice(ROOT.length);
    if (/(^|\/)env\.ts$|\/env\//.test(where)) {
      for (const m of text.matchAll(SCHEMA_KEY)) found.set(m[1]!, where);
    }
    for (const m of text.matchAll(PROCESS_ENV)) found.set((m[1] ?? m[2])!, where);
  }
  return found;
}

test('every environment variable read in code is in docs/configuration.md', () => {
  const docs = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
  const read = variablesRead();
  // The scan found the schemas (a moved env.ts must not make this pass on nothing).
  expect(read.has('NATS_URL')).toBe(true);
  expect(read.has('EDGE_PORT')).toBe(true);
  expect(read.has('BILLING_AGGREGATOR_ACK_WAIT_MS')).toBe(true);
  const missing = [...read].filter(([name]) => !docs.includes(`\`${name}\``));
  expect(missing.map(([name, file]) => `${name} (${file})`)).toEqual([]);
});
