import { loadConfigFile, parseConfig } from '@holdfast/config';
import { describe, expect, it } from 'vitest';
import { demoKeys } from './demo-keys.js';
import { EXAMPLE_CONFIG } from './env.js';

describe('demoKeys', () => {
  it('finds the three demo keys of the example config', async () => {
    const keys = demoKeys(await loadConfigFile(EXAMPLE_CONFIG));
    expect(keys).toEqual([
      { tenant: 'batch-summariser', key: 'sk-hf-demo-batch-summariser' },
      { tenant: 'support-bot', key: 'sk-hf-demo-support-bot' },
      { tenant: 'finance-ops', key: 'sk-hf-demo-finance-ops' },
    ]);
  });

  it('finds none in a config without them', () => {
    const parsed = parseConfig({ tenants: [{ id: 'team' }] });
    if (!parsed.ok) throw new Error(parsed.error.errors.join('\n'));
    expect(demoKeys(parsed.value)).toEqual([]);
  });
});
