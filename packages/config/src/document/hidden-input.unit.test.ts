import { describe, expect, it } from 'vitest';
import { HIDDEN_INPUT_TOKENS, hiddenInputTokens } from './hidden-input.js';
import { parseConfig } from './load.js';

const opus = {
  id: 'claude-opus',
  upstream: 'claude',
  price: { inputPerMTok: 5, outputPerMTok: 25 },
};
const doc = (model: object) => ({
  upstreams: [{ id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' }],
  models: [{ ...opus, ...model }],
  tenants: [],
});

describe('models[].hiddenInputTokens', () => {
  it('defaults every figure, and takes a raised one', () => {
    const plain = parseConfig(doc({}));
    if (!plain.ok) throw new Error(plain.error.errors.join('\n'));
    expect(hiddenInputTokens(plain.value.models.get('claude-opus'))).toEqual(HIDDEN_INPUT_TOKENS);
    expect(hiddenInputTokens(undefined)).toEqual(HIDDEN_INPUT_TOKENS);
    const raised = parseConfig(doc({ hiddenInputTokens: { toolUse: 1_500, computer: 4_000 } }));
    if (!raised.ok) throw new Error(raised.error.errors.join('\n'));
    expect(hiddenInputTokens(raised.value.models.get('claude-opus'))).toEqual({
      ...HIDDEN_INPUT_TOKENS,
      toolUse: 1_500,
      computer: 4_000,
    });
  });

  it('refuses a figure below its default, a fraction, an unknown field, naming each', () => {
    const r = parseConfig(doc({ hiddenInputTokens: { toolUse: 346, bash: 600.5, webSearch: 10 } }));
    if (r.ok) throw new Error('expected errors');
    const errors = r.error.errors.join('\n');
    expect(errors).toContain('hiddenInputTokens.toolUse');
    expect(errors).toContain('must be at least 1,024, the default');
    expect(errors).toContain('hiddenInputTokens.bash');
    expect(errors).toContain('webSearch');
  });
});
