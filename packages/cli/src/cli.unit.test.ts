import type { StackState } from '@holdfast/config';
import { describe, expect, test, vi } from 'vitest';
import { run } from './cli.js';
import type { Io } from './context.js';
import { EXIT, exitFor } from './exit.js';
import { amount, table } from './format.js';

const TOKEN = 'admin-secret-token-123456';

function io(files: Record<string, string> = {}, reply?: Response | Error) {
  const out: string[] = [];
  const err: string[] = [];
  const fetch = vi.fn((_url: URL, _init?: RequestInit) =>
    reply instanceof Error ? Promise.reject(reply) : Promise.resolve(reply ?? new Response('{}')),
  );
  const value: Io = {
    env: { HOLDFAST_ADMIN_TOKEN: TOKEN },
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    readFile: (p) =>
      p in files ? Promise.resolve(files[p]!) : Promise.reject(new Error('ENOENT: no such file')),
    fetch: fetch as unknown as typeof globalThis.fetch,
  };
  return { io: value, out, err, fetch };
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

describe('command line', () => {
  test('no command: usage and exit 2; --help: usage and exit 0', async () => {
    const none = io();
    expect(await run([], none.io)).toBe(EXIT.usage);
    expect(none.out.join('')).toContain('holdfast apply FILE');
    expect(await run(['keys', 'create', '--help'], io().io)).toBe(EXIT.ok);
  });
  test('unknown commands and options, missing arguments: exit 2, nothing sent', async () => {
    for (const argv of [
      ['frobnicate'],
      ['keys', 'rotate'],
      ['keys', 'create', '--id', 'k1'],
      ['keys', 'create', '--tenant', 't', '--id', 'k1', '--colour', 'red'],
      ['suspend'],
      ['resume', 'a', 'b'],
      ['resume', 'a', '--reason', 'x'],
      ['suspend', 'a', '--grace-ms', 'soon'],
      ['apply'],
    ]) {
      const x = io();
      expect(await run(argv, x.io), argv.join(' ')).toBe(EXIT.usage);
      expect(x.err.join('')).toContain('holdfast --help');
      expect(x.fetch).not.toHaveBeenCalled();
    }
  });
});

describe('apply', () => {
  test('an invalid file is refused locally, naming every field, and never sent', async () => {
    const x = io({
      'bad.yaml': 'tenants:\n  - { id: Bad.Team, budgets: [{ window: week, limit: -1 }] }\n',
    });
    expect(await run(['apply', 'bad.yaml'], x.io)).toBe(EXIT.invalid);
    const err = x.err.join('');
    expect(err).toContain('bad.yaml: invalid config (nothing applied)');
    for (const field of [
      'tenants[id=Bad.Team].id',
      'tenants[id=Bad.Team].budgets[week-tokens].window',
      'tenants[id=Bad.Team].budgets[week-tokens].limit',
    ])
      expect(err).toContain(field);
    expect(x.fetch).not.toHaveBeenCalled();
  });
  test('--dry-run validates only; a missing file is exit 3', async () => {
    const x = io({ 'ok.yaml': 'tenants: [{ id: team }]\n' });
    expect(await run(['apply', 'ok.yaml', '--dry-run'], x.io)).toBe(EXIT.ok);
    expect(x.out.join('')).toContain('ok.yaml is valid: 1 tenants, 0 models');
    expect(x.fetch).not.toHaveBeenCalled();
    expect(await run(['apply', 'missing.yaml'], io().io)).toBe(EXIT.invalid);
  });
  test('sends the text as YAML with the token; --expected-version goes in the query', async () => {
    const x = io(
      { 'ok.yaml': 'tenants: [{ id: team }]\n' },
      json(200, { version: 4, hash: 'ab'.repeat(32), changed: true }),
    );
    expect(await run(['apply', 'ok.yaml', '--expected-version', '3'], x.io)).toBe(EXIT.ok);
    const [url, init] = x.fetch.mock.calls[0]!;
    expect(String(url)).toBe('http://127.0.0.1:8080/admin/config?expectedVersion=3');
    expect(init).toMatchObject({
      method: 'PUT',
      body: 'tenants: [{ id: team }]\n',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/yaml' },
    });
    expect(x.out.join('')).toContain('config version 4');
  });
});

test('errors from the edge map to exit codes, and never echo the token', async () => {
  const cases: [Response | Error, number][] = [
    [
      json(401, { error: { code: 'admin_token_required', message: 'Send the admin token' } }),
      EXIT.auth,
    ],
    [
      json(403, {
        error: { code: 'admin_token_invalid', message: 'That is not the admin token.' },
      }),
      EXIT.auth,
    ],
    [json(404, { error: { code: 'admin_disabled', message: 'disabled' } }), EXIT.auth],
    [json(404, { error: { code: 'not_found', message: 'Unknown tenant "x".' } }), EXIT.notFound],
    [json(409, { error: { code: 'version_conflict', message: 'Conflict' } }), EXIT.conflict],
    [
      json(503, { error: { code: 'budget_authority_unavailable', message: 'later' } }),
      EXIT.unavailable,
    ],
    [new Response('<html>bad gateway</html>', { status: 502 }), EXIT.failed],
    [
      Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } }),
      EXIT.unavailable,
    ],
  ];
  for (const [reply, exit] of cases) {
    const x = io({}, reply);
    expect(await run(['suspend', 'team'], x.io)).toBe(exit);
    const text = x.err.join('') + x.out.join('');
    expect(text).toMatch(/^holdfast: /);
    expect(text).not.toContain(TOKEN);
  }
  expect(exitFor(413, 'invalid_request')).toBe(EXIT.invalid);
  expect(exitFor(400, 'invalid_config')).toBe(EXIT.invalid);
  expect(exitFor(500, 'internal')).toBe(EXIT.failed);
});

test('keys create prints the secret alone on stdout, the note on stderr', async () => {
  const x = io(
    {},
    json(201, {
      data: { id: 'k1', tenant: 't', defaultUseCase: null },
      secret: 'sk-hf-xyz',
      config: {},
    }),
  );
  expect(
    await run(['keys', 'create', '--tenant', 't', '--id', 'k1', '--use-case', 'UC-1'], x.io),
  ).toBe(EXIT.ok);
  expect(x.out).toEqual(['sk-hf-xyz\n']);
  expect(x.err.join('')).toContain('shown once');
  expect(JSON.parse(x.fetch.mock.calls[0]![1]!.body as string)).toEqual({
    id: 'k1',
    defaultUseCase: 'UC-1',
  });
});

test('without HOLDFAST_URL or HOLDFAST_ADMIN_TOKEN, the running pnpm stack is used', async () => {
  const x = io({}, json(200, { data: { tenant: 'team', suspended: true, changed: true } }));
  const url = 'http://127.0.0.1:18080';
  const state = { urls: { edge: url } } as unknown as StackState;
  const withStack: Io = {
    ...x.io,
    env: {},
    stack: () => ({ dir: '/s', state, adminToken: 'hf-admin-from-the-stack-dir' }),
  };
  expect(await run(['suspend', 'team'], withStack)).toBe(EXIT.ok);
  const [sent, init] = x.fetch.mock.calls[0]!;
  expect(String(sent)).toBe(`${url}/admin/tenants/team/suspend`);
  expect(init?.headers).toMatchObject({ authorization: 'Bearer hf-admin-from-the-stack-dir' });

  const none = io();
  const noToken: Io = {
    ...none.io,
    env: {},
    stack: () => ({ dir: '/s', state: undefined, adminToken: undefined }),
  };
  expect(await run(['suspend', 'team'], noToken)).toBe(EXIT.auth);
  expect(none.err.join('')).toContain(
    "no admin token: set HOLDFAST_ADMIN_TOKEN to the edge's EDGE_ADMIN_TOKEN, or start `pnpm stack`, which keeps one in /s/admin-token",
  );
});

test('formatting: aligned tables, amounts in their unit', () => {
  expect(
    table(
      ['A', 'LONGER'],
      [
        ['xyz', '1'],
        ['q', '22'],
      ],
    ),
  ).toBe('A    LONGER\nxyz  1\nq    22\n');
  expect(amount(38_176, 'tokens')).toBe('38,176');
  expect(amount(2_500_000, 'usd')).toBe('$2.50');
  expect(amount(1_234, 'usd')).toBe('$0.001234');
  expect(amount(155, 'usd')).toBe('$0.000155');
});
