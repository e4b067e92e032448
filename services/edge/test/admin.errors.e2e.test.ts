import { expect, onTestFinished } from 'vitest';
import { ADMIN_BODY_LIMIT_BYTES } from '../src/admin/plugin.js';
import { startEdge } from '../src/index.js';
import { admin, ADMIN_TOKEN, ids, withAdmin } from './admin.js';
import { edgeTest as test } from './harness.js';

test('bad input is refused with a code naming the field, and changes nothing', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  const version: number = (await call('GET', '/admin/config')).body.version;
  const expectError = async (
    r: Promise<{
      status: number;
      body: { error: { code: string; message: string; param: string | null } };
    }>,
    status: number,
    code: string,
    contains: string[] = [],
  ) => {
    const { status: got, body } = await r;
    expect({ status: got, code: body.error.code }).toEqual({ status, code });
    for (const c of contains) expect(body.error.message).toContain(c);
    return body.error;
  };

  // Malformed documents.
  await expectError(
    call('PUT', '/admin/config', '{"tenants": [', { 'content-type': 'application/json' }),
    400,
    'invalid_request',
    ['JSON'],
  );
  await expectError(call('PUT', '/admin/config', 'tenants: [ {id: '), 400, 'invalid_config', [
    'not valid YAML',
  ]);
  await expectError(call('PUT', '/admin/config', '   '), 400, 'invalid_request', ['whole config']);
  // A document that declares nothing would remove every declared tenant: refused, merged or not.
  for (const [empty, mode] of [
    [{}, 'merge'],
    ['# nothing here\n', 'merge'],
    ['null', 'replace'],
    ['---\n', 'replace'],
  ] as const) {
    await expectError(call('PUT', `/admin/config?mode=${mode}`, empty), 400, 'invalid_config', [
      'empty',
      'tenants: []',
    ]);
  }
  await expectError(call('PUT', '/admin/config', [1, 2]), 400, 'invalid_request');
  const invalid = await expectError(
    call('PUT', '/admin/config', {
      tenants: [
        { id: 'Bad.Tenant' },
        { id: 'ok', parent: 'missing', budgets: [{ window: 'week', limit: -1 }] },
      ],
    }),
    400,
    'invalid_config',
  );
  for (const field of [
    'tenants[id=Bad.Tenant].id',
    'tenants[id=ok].budgets[week-tokens].window',
    'tenants[id=ok].budgets[week-tokens].limit',
  ])
    expect(invalid.message).toContain(field);
  // A model's hidden-input figure below its default (it would hold less than is published).
  const price = { inputPerMTok: 5, outputPerMTok: 25 };
  const low = { id: 'claude-low', upstream: 'default', price, hiddenInputTokens: { toolUse: 346 } };
  await expectError(call('PUT', '/admin/config', { models: [low] }), 400, 'invalid_config', [
    'models[id=claude-low].hiddenInputTokens.toolUse',
    'must be at least 1,024',
  ]);
  await expectError(
    call('PUT', '/admin/config', `# ${'x'.repeat(ADMIN_BODY_LIMIT_BYTES)}`),
    413,
    'invalid_request',
    ['too large'],
  );

  // Unknown tenants, keys, budgets, use cases, models.
  await expectError(call('GET', '/admin/tenants/nobody'), 404, 'not_found', ['"nobody"']);
  await expectError(call('PATCH', '/admin/tenants/nobody', { mode: 'post' }), 404, 'not_found');
  await expectError(
    call('PUT', '/admin/tenants/nobody/budgets/day-tokens', { limit: 1 }),
    404,
    'not_found',
  );
  await expectError(call('POST', '/admin/tenants/nobody/keys', { id: 'k-1' }), 404, 'not_found');
  await expectError(call('POST', '/admin/tenants/nobody/suspend', {}), 404, 'not_found');
  await expectError(call('GET', '/admin/keys?tenant=nobody'), 404, 'not_found');
  await expectError(call('DELETE', '/admin/tenants/multi/keys/nope'), 404, 'not_found');
  await expectError(call('DELETE', '/admin/tenants/multi/budgets/day-usd'), 404, 'not_found');
  await expectError(call('DELETE', '/admin/tenants/multi/use-cases/UC-9'), 404, 'not_found');
  await expectError(
    call('PUT', '/admin/models/gpt-5/price', { inputPerMTok: 1, outputPerMTok: 2 }),
    404,
    'not_found',
  );
  // A model id with a slash travels URL-encoded.
  await expectError(
    call('PUT', '/admin/models/Qwen%2FQwen2.5-7B/price', { inputPerMTok: 1, outputPerMTok: 2 }),
    404,
    'not_found',
    ['"Qwen/Qwen2.5-7B"'],
  );

  // Ids that cannot be valid, and bodies of the wrong shape.
  const badId = await expectError(call('GET', '/admin/tenants/Bad.Tenant'), 400, 'invalid_request');
  expect(badId.param).toBe('tenant');
  expect(
    (
      await expectError(
        call('PUT', '/admin/tenants/multi/budgets/week-tokens', { limit: 1 }),
        400,
        'invalid_request',
      )
    ).param,
  ).toBe('budget');
  expect(
    (
      await expectError(
        call('POST', '/admin/tenants/multi/keys', { id: 'bad id' }),
        400,
        'invalid_request',
      )
    ).param,
  ).toBe('id');
  expect(
    (
      await expectError(
        call('PUT', '/admin/tenants/multi/budgets/day-tokens', { limit: -1 }),
        400,
        'invalid_request',
      )
    ).param,
  ).toBe('limit');
  await expectError(
    call('PUT', '/admin/tenants/multi/budgets/day-tokens', { limit: 1, color: 'red' }),
    400,
    'invalid_request',
  );
  await expectError(
    call('PATCH', '/admin/tenants/multi', { id: 'other' }),
    400,
    'invalid_request',
    ['"id"'],
  );
  await expectError(call('PATCH', '/admin/tenants/multi', { keys: [] }), 400, 'invalid_request', [
    '/keys',
  ]);
  await expectError(
    call('PATCH', '/admin/tenants/multi', { maxInFlight: 0, mode: 'fast' }),
    400,
    'invalid_request',
    ['maxInFlight', 'mode'],
  );
  await expectError(
    call('POST', '/admin/tenants/multi/suspend', { graceMs: -5 }),
    400,
    'invalid_request',
  );
  await expectError(
    call('POST', '/admin/tenants/multi/keys', { id: 'multi-9', defaultUseCase: 'UC-404' }),
    400,
    'invalid_request',
    ['UC-404'],
  );
  expect(
    (
      await expectError(
        call('PATCH', '/admin/tenants/multi?expectedVersion=-1', {}),
        400,
        'invalid_request',
      )
    ).param,
  ).toBe('expectedVersion');

  // Cross-field rules come from the authority, naming the field in the whole document.
  await expectError(
    call('PUT', '/admin/tenants/multi/use-cases/UC-3', { maxTokens: 10, models: ['gpt-5'] }),
    400,
    'invalid_config',
    ['tenants[id=multi].useCases[id=UC-3].models[0]', 'unknown model "gpt-5"'],
  );
  await expectError(call('DELETE', '/admin/tenants/multi/use-cases/UC-2'), 400, 'invalid_config', [
    'tenants[id=multi].keys[id=multi-1].defaultUseCase',
  ]);

  // Ids that are taken.
  await expectError(call('POST', '/admin/tenants', { id: 'multi' }), 409, 'already_exists');
  await expectError(
    call('POST', '/admin/tenants/multi/keys', { id: 'batch-1' }),
    409,
    'already_exists',
    ['batch-1'],
  );

  expect((await call('GET', '/admin/config')).body.version).toBe(version);
});

test('an edit based on a stale version is refused with 409; concurrent edits all land', async ({
  stack,
  nc,
  iso,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  // A second edge on the same authority: its edits race this one's through the version check.
  const other = await startEdge({ nc, names: iso.names, options: { adminToken: ADMIN_TOKEN } });
  onTestFinished(() => other.stop());
  const callOther = admin({ ...s, edge: other });
  const read = await call('GET', '/admin/config');
  const v: number = read.body.version;

  // Two admins read version v; the first one's change lands...
  const first = await call('PATCH', `/admin/tenants/multi?expectedVersion=${v}`, {
    maxInFlight: 3,
  });
  expect(first.status).toBe(200);
  expect(first.body.config.version).toBe(v + 1);
  // ...the second one's, based on v, is refused whole and would have undone the first.
  const doc = read.body.config;
  doc.tenants[3].failOpen = true;
  const stale = await call('PUT', `/admin/config?expectedVersion=${v}`, doc);
  expect(stale.status).toBe(409);
  expect(stale.body.error).toMatchObject({
    code: 'version_conflict',
    type: 'invalid_request_error',
  });
  expect(stale.body.error.message).toContain(`version ${v + 1}, not the expected ${v}`);
  const stalePatch = await call('PATCH', `/admin/tenants/multi?expectedVersion=${v}`, {
    failOpen: true,
  });
  expect(stalePatch.status).toBe(409);
  const now = (await call('GET', '/admin/tenants/multi')).body.data;
  expect(now).toMatchObject({ maxInFlight: 3, failOpen: false });

  // Without a pinned version, concurrent edits are redone on top of each other: none is lost.
  const created = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      (i % 2 ? call : callOther)('POST', '/admin/tenants/multi/keys', { id: `multi-c${i}` }),
    ),
  );
  expect(created.map((r) => r.status)).toEqual(Array(8).fill(201));
  const keys = ids((await call('GET', '/admin/tenants/multi/keys')).body.data);
  expect(keys.sort()).toEqual(
    ['multi-1', ...Array.from({ length: 8 }, (_, i) => `multi-c${i}`)].sort(),
  );
  expect((await call('GET', '/admin/config')).body.version).toBe(v + 1 + 8);
});
