import { createLogger, type AuthorityClient } from '@holdfast/runtime';
import { expect, test } from 'vitest';
import { ConfigSnapshot } from './config-snapshot.js';

/** A config of one team whose month limit is `limit`. */
const doc = (limit: number) => ({
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1', apiKeyEnv: 'KEY' }],
  models: [
    {
      id: 'm',
      upstream: 'default',
      tokenizer: 'o200k_base',
      maxOutputTokens: 1_024,
      price: { inputPerMTok: 1, outputPerMTok: 2 },
    },
  ],
  tenants: [
    {
      id: 'team',
      budgets: [{ window: 'month', limit, unit: 'tokens' }],
      useCases: [{ id: 'chat', maxTokens: 1_024, models: ['m'] }],
    },
  ],
});

/** A snapshot over an authority that answers `answers`, one per fetch. */
function snapshotOf(answers: Array<{ version: number; limit: number }>) {
  const authority = {
    configGet: () => {
      const { version, limit } = answers.shift()!;
      return Promise.resolve({
        ok: true,
        value: { version, hash: `h${limit}`, config: doc(limit) },
      });
    },
  } as unknown as AuthorityClient;
  return new ConfigSnapshot({
    authority,
    nc: undefined as never,
    names: undefined as never,
    logger: createLogger({ name: 'config-snapshot-test', level: 'silent' }),
    pollMs: 1_000,
  });
}

const limitOf = (s: ConfigSnapshot) =>
  s.current?.tenants.get('team')?.budgets.find((b) => b.window === 'month')?.limit;

test('a config is loaded when its version moves, or when the same version holds another document (Redis reset, as many applies since)', async () => {
  const s = snapshotOf([
    { version: 3, limit: 1_000 },
    { version: 3, limit: 1_000 },
    { version: 3, limit: 50 },
    { version: 4, limit: 60 },
  ]);
  expect(await s.refresh()).toBe(true);
  expect(limitOf(s)).toBe(1_000);
  // The same version and document: nothing to load.
  expect(await s.refresh()).toBe(true);
  expect(limitOf(s)).toBe(1_000);
  // The same version, another document: this one is served, not the old.
  expect(await s.refresh()).toBe(true);
  expect(limitOf(s)).toBe(50);
  expect(await s.refresh()).toBe(true);
  expect({ version: s.version, limit: limitOf(s) }).toEqual({ version: 4, limit: 60 });
});
