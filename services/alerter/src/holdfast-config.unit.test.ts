import { parseConfig } from '@holdfast/config';
import { createLogger } from '@holdfast/runtime';
import { expect, test } from 'vitest';
import { ConfigSource } from './holdfast-config.js';
import { HARD_LEVEL } from './thresholds.js';

test('a window policy carries its watched levels, and is one object per window', () => {
  const parsed = parseConfig({
    tenants: [{ id: 'team-o', budgets: [{ window: 'month', limit: 1_000, soft: [0.5, 0.8] }] }],
  });
  if (!parsed.ok) throw new Error(parsed.error.errors.join());
  const config = new ConfigSource({
    config: parsed.value,
    logger: createLogger({ name: 'config-test', level: 'silent' }),
  });
  // Each event's windows come with strings of their own (JSON.parse).
  const w = (enforce: boolean) =>
    JSON.parse(JSON.stringify({ tenant: 'team-o', budget: 'month-tokens', enforce })) as {
      tenant: string;
      budget: string;
      enforce: boolean;
    };
  const policy = config.policy(w(true));
  expect(policy).toMatchObject({ soft: [0.5, 0.8], levels: [0.5, 0.8, HARD_LEVEL] });
  expect(config.policy(w(true))).toBe(policy);
  expect(Object.isFrozen(policy)).toBe(true);
  // A window the config does not know: the defaults, its levels without the hard one.
  const unknown = config.policy({ tenant: 'team-x', budget: 'day-usd', enforce: false });
  expect(unknown).toMatchObject({ hard: false, levels: [0.8, 0.95] });
  expect(config.policy({ tenant: 'team-x', budget: 'day-usd', enforce: false })).toBe(unknown);
});
