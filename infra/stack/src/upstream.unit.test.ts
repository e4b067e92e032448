import { describe, expect, it } from 'vitest';
import { ANTHROPIC_API_URL, chooseUpstream, OPENAI_API_URL } from './upstream.js';

describe('chooseUpstream', () => {
  const mock = 'http://127.0.0.1:8089/v1';
  it('uses the mock when no provider is configured', () => {
    expect(chooseUpstream({}, mock).baseUrl).toBe(mock);
  });
  it('uses OpenAI when only its key is set', () => {
    expect(chooseUpstream({ OPENAI_API_KEY: 'sk-x' }, mock).baseUrl).toBe(OPENAI_API_URL);
  });
  it('uses OPENAI_BASE_URL when it is set, with or without a key', () => {
    const base = 'http://llm.internal:8000/v1';
    expect(chooseUpstream({ OPENAI_BASE_URL: base }, mock).baseUrl).toBe(base);
    expect(chooseUpstream({ OPENAI_BASE_URL: base, OPENAI_API_KEY: 'k' }, mock).baseUrl).toBe(base);
  });
  it("chooses Anthropic's upstream from its own variables, the mock's root by default", () => {
    const root = 'http://127.0.0.1:8089';
    expect(chooseUpstream({ OPENAI_API_KEY: 'sk-x' }, root, 'anthropic').baseUrl).toBe(root);
    expect(chooseUpstream({ ANTHROPIC_API_KEY: 'k' }, root, 'anthropic').baseUrl).toBe(
      ANTHROPIC_API_URL,
    );
    const base = 'http://claude.internal';
    expect(chooseUpstream({ ANTHROPIC_BASE_URL: base }, root, 'anthropic').baseUrl).toBe(base);
  });
});
