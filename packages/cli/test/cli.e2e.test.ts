import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, onTestFinished } from 'vitest';
import {
  ADMIN_TOKEN,
  chat,
  cliTest as test,
  holdfast,
  TEAM_KEY,
  teamConfig,
  type CliStack,
} from './stack.js';

const env = (s: CliStack, token = ADMIN_TOKEN) => ({
  HOLDFAST_URL: s.url,
  HOLDFAST_ADMIN_TOKEN: token,
});

/** A chat call through the edge with a key; returns the HTTP status. */
const callWith = async (s: CliStack, key: string) => (await chat(s, key)).status;

async function version(s: CliStack): Promise<number> {
  const r = await s.authority.configGet();
  return r.ok ? r.value.version : -1;
}

/** A file in a temporary folder, removed after the test. */
async function file(name: string, text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-cli-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

test('holdfast apply: invalid files are refused locally; valid ones applied, then unchanged', async ({
  stack,
}) => {
  const before = await version(stack);
  const bad = await file('bad.yaml', 'tenants:\n  - id: Team One\n    mode: fastest\n');
  const refused = await holdfast(['apply', bad], env(stack));
  expect(refused.code).toBe(3);
  expect(refused.stderr).toContain('tenants[id=Team One].id');
  expect(refused.stderr).toContain('tenants[id=Team One].mode');
  expect(await version(stack)).toBe(before);

  const good = await file('good.json', JSON.stringify(teamConfig(stack.upstreamUrl, 50_000)));
  const applied = await holdfast(['apply', good], env(stack));
  expect(applied).toMatchObject({ code: 0, stderr: '' });
  expect(applied.stdout).toContain(`config version ${before + 1}`);
  const again = await holdfast(['apply', good, '--json'], env(stack));
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ version: before + 1, changed: false });

  const stale = await holdfast(['apply', good, '--expected-version', String(before)], env(stack));
  expect(stale.code).toBe(6);
  expect(stale.stderr).toContain('version_conflict');
});

test('holdfast keys: create prints a working secret once; list never shows it; delete', async ({
  stack,
}) => {
  const created = await holdfast(
    ['keys', 'create', '--tenant', 'team', '--id', 'team-2', '--use-case', 'UC-1'],
    env(stack),
  );
  expect(created.code).toBe(0);
  const secret = created.stdout.trim();
  expect(secret).toMatch(/^sk-hf-[A-Za-z0-9_-]{43}$/);
  expect(created.stderr).toContain('shown once');
  expect(await callWith(stack, secret)).toBe(200);

  const list = await holdfast(['keys', 'list'], env(stack));
  expect(list.code).toBe(0);
  expect(list.stdout).toMatch(/team\s+team-1\s+-/);
  expect(list.stdout).toMatch(/team\s+team-2\s+UC-1/);
  expect(list.stdout).not.toContain(secret);

  expect(
    (await holdfast(['keys', 'create', '--tenant', 'team', '--id', 'team-2'], env(stack))).code,
  ).toBe(6);
  expect(
    (await holdfast(['keys', 'create', '--tenant', 'ghost', '--id', 'g-1'], env(stack))).code,
  ).toBe(5);
  const deleted = await holdfast(
    ['keys', 'delete', '--tenant', 'team', '--id', 'team-2'],
    env(stack),
  );
  expect(deleted.code).toBe(0);
  expect(await callWith(stack, secret)).toBe(401);
});

test('holdfast suspend / resume / usage', async ({ stack }) => {
  expect(await callWith(stack, TEAM_KEY)).toBe(200);
  const suspended = await holdfast(['suspend', 'team', '--reason', 'audit'], env(stack));
  expect(suspended).toMatchObject({ code: 0, stdout: 'team is now suspended\n' });
  expect(await callWith(stack, TEAM_KEY)).toBe(403);

  const usage = await holdfast(['usage'], env(stack));
  expect(usage.code).toBe(0);
  expect(usage.stdout).toMatch(/TENANT\s+WINDOW\s+USED\s+HELD\s+LIMIT\s+USED%\s+STATE/);
  expect(usage.stdout).toMatch(/team\s+month-tokens\s+\d+\s+0\s+40,000\s+0\.\d%/);
  expect(usage.stdout).toContain('suspended: team');
  const json = JSON.parse((await holdfast(['usage', 'team', '--json'], env(stack))).stdout);
  expect(json.tenants[0]).toMatchObject({ tenant: 'team', suspended: true });
  expect((await holdfast(['usage', 'ghost'], env(stack))).code).toBe(5);

  expect((await holdfast(['resume', 'team'], env(stack))).stdout).toBe('team is now active\n');
  expect(await callWith(stack, TEAM_KEY)).toBe(200);
  expect((await holdfast(['suspend', 'ghost'], env(stack))).code).toBe(5);
});

test('holdfast without the right token or edge: exit 4 or 7, and the token is never printed', async ({
  stack,
}) => {
  const wrong = await holdfast(['keys', 'list'], env(stack, 'not-the-token-but-secret'));
  expect(wrong.code).toBe(4);
  expect(wrong.stderr).toContain('admin_token_invalid');
  expect(wrong.stderr + wrong.stdout).not.toContain('not-the-token-but-secret');
  expect((await holdfast(['keys', 'list'], { HOLDFAST_URL: stack.url })).code).toBe(4);
  const down = await holdfast(['usage', '--url', 'http://127.0.0.1:1'], env(stack));
  expect(down.code).toBe(7);
  expect(down.stderr).toContain('cannot reach the edge');
  expect(down.stderr).not.toContain(ADMIN_TOKEN);
});

test('a key made with holdfast keys create survives holdfast apply of the file; diff lists it; --replace drops it', async ({
  stack,
}) => {
  const doc = teamConfig(stack.upstreamUrl);
  const path = await file('holdfast.json', JSON.stringify(doc));
  expect((await holdfast(['apply', path], env(stack))).code).toBe(0);
  const created = await holdfast(
    ['keys', 'create', '--tenant', 'team', '--id', 'team-2'],
    env(stack),
  );
  const secret = created.stdout.trim();
  expect(await callWith(stack, secret)).toBe(200);

  const again = await holdfast(['apply', path], env(stack));
  expect(again.code).toBe(0);
  expect(again.stdout).toContain(
    'kept 1 change(s) made through the admin API that the file leaves alone:\n  + tenants[id=team].keys[id=team-2] (added)\n',
  );
  expect(await callWith(stack, secret)).toBe(200);
  const diff = await holdfast(['diff'], env(stack));
  expect(diff.stdout).toContain('+ tenants[id=team].keys[id=team-2] (added)');

  // A changed file applies its change and still keeps the key.
  await writeFile(path, JSON.stringify(teamConfig(stack.upstreamUrl, 50_000)));
  const changed = await holdfast(['apply', path, '--json'], env(stack));
  expect(JSON.parse(changed.stdout)).toMatchObject({
    changed: true,
    kept: [{ path: 'tenants[id=team].keys[id=team-2]', change: 'added' }],
    overridden: [],
  });
  expect(await callWith(stack, secret)).toBe(200);

  const replaced = await holdfast(['apply', path, '--replace'], env(stack));
  expect(replaced.stdout).toContain(
    'dropped 1 change(s) made through the admin API:\n  + tenants[id=team].keys[id=team-2] (added)\n',
  );
  expect(await callWith(stack, secret)).toBe(401);
  expect((await holdfast(['diff'], env(stack))).stdout).toContain(
    'no changes made through the admin API since',
  );
});
