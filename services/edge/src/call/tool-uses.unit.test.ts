import { describe, expect, it } from 'vitest';
import { heldToolUses, type OfferedTools } from './tool-uses.js';

const model = (toolUses?: Record<string, number>) => ({
  id: 'm',
  price: { inputPerMTok: 1, outputPerMTok: 1, ...(toolUses ? { toolUses } : {}) },
});
const priced = model({ web_search: 10, file_search: 2.5, code_interpreter: 30 });

const messages = (...tools: { type: string; maxUses?: unknown }[]): OfferedTools => ({
  per: 'tool',
  tools: tools.map((t, i) => ({ type: t.type, param: `tools.${i}`, maxUses: t.maxUses })),
});
const responses = (maxToolCalls: unknown, ...types: string[]): OfferedTools => ({
  per: 'call',
  tools: types.map((type, i) => ({ type, param: `tools.${i}` })),
  maxToolCalls,
});

const refusal = (r: ReturnType<typeof heldToolUses>) => {
  if (r.ok) throw new Error(`expected a 400, got ${JSON.stringify(r.value)}`);
  return { code: r.error.code, param: r.error.param, message: r.error.message };
};

describe('heldToolUses', () => {
  it('Chat Completions: one web search on a search model, none on another', () => {
    const search = { ...model({ web_search: 25 }), searchModel: true };
    const one = { per: 'model', choices: 1 } as const;
    expect(heldToolUses(one, search, 'openai')).toEqual({ ok: true, value: { web_search: 1 } });
    expect(heldToolUses(one, priced, 'openai')).toEqual({ ok: true, value: {} });
    // More choices than one on a search model: a 400 naming n (how many searches they make,
    // no usage says); on another model they search nothing.
    const three = { per: 'model', choices: 3 } as const;
    expect(refusal(heldToolUses(three, search, 'openai'))).toMatchObject({
      code: 'invalid_request',
      param: 'n',
    });
    expect(heldToolUses(three, priced, 'openai')).toEqual({ ok: true, value: {} });
  });

  it('Messages: each tool held its max_uses, versions of a kind added up', () => {
    const r = heldToolUses(
      messages(
        { type: 'web_search_20250305', maxUses: 3 },
        { type: 'web_search_20260101', maxUses: 2 },
        { type: 'custom' },
        { type: 'code_execution_20250825' },
      ),
      priced,
      'anthropic',
    );
    expect(r).toEqual({ ok: true, value: { web_search: 5 } });
  });

  it('Responses: max_tool_calls held at the dearest priced tool offered', () => {
    expect(
      heldToolUses(responses(4, 'function', 'file_search', 'web_search_preview'), priced, 'openai'),
    ).toEqual({
      ok: true,
      value: { web_search: 4 },
    });
    expect(heldToolUses(responses(2, 'file_search', 'code_interpreter'), priced, 'openai')).toEqual(
      {
        ok: true,
        value: { code_interpreter: 2 },
      },
    );
    // No tool billed per use: no bound needed.
    expect(heldToolUses(responses(undefined, 'function', 'mcp'), priced, 'openai')).toEqual({
      ok: true,
      value: {},
    });
  });

  it('a bound absent, 0, negative, huge, fractional or a string is a 400 naming the field', () => {
    expect(
      refusal(heldToolUses(messages({ type: 'web_search_20250305' }), priced, 'anthropic')),
    ).toMatchObject({
      code: 'invalid_request',
      param: 'tools.0.max_uses',
    });
    for (const maxUses of [0, -1, 1_001, 1.5, '3', null, true, Number.NaN]) {
      const r = refusal(
        heldToolUses(messages({ type: 'web_search_20250305', maxUses }), priced, 'anthropic'),
      );
      expect(r.param, String(maxUses)).toBe('tools.0.max_uses');
      if (maxUses !== null) expect(r.message).toContain('integer from 1 to 1,000');
    }
    expect(
      refusal(
        heldToolUses(
          messages(
            { type: 'web_search_20250305', maxUses: 600 },
            { type: 'web_search_20250305', maxUses: 600 },
          ),
          priced,
          'anthropic',
        ),
      ),
    ).toMatchObject({ param: 'tools.1.max_uses' });
    expect(
      refusal(heldToolUses(responses(undefined, 'web_search'), priced, 'openai')),
    ).toMatchObject({
      param: 'max_tool_calls',
    });
    expect(refusal(heldToolUses(responses(5_000, 'web_search'), priced, 'openai')).param).toBe(
      'max_tool_calls',
    );
  });

  it('a tool that carries a fee on a model that does not price it is a 400 naming price.toolUses', () => {
    const r = refusal(heldToolUses(responses(2, 'web_search'), model(), 'openai'));
    expect(r).toMatchObject({ code: 'invalid_request', param: 'tools.0' });
    expect(r.message).toContain('price.toolUses.web_search');
    expect(
      refusal(heldToolUses(responses(2, 'file_search'), model({ web_search: 10 }), 'openai'))
        .message,
    ).toContain('price.toolUses.file_search');
    // web_fetch has no fee unless priced: no bound asked for.
    expect(heldToolUses(messages({ type: 'web_fetch_20250910' }), model(), 'anthropic')).toEqual({
      ok: true,
      value: {},
    });
    expect(
      refusal(
        heldToolUses(
          messages({ type: 'web_fetch_20250910' }),
          model({ web_fetch: 1 }),
          'anthropic',
        ),
      ).param,
    ).toBe('tools.0.max_uses');
  });

  it('Responses image_generation: held at max_tool_calls x its fee when dearest, refused unpriced or with partial_images', () => {
    const images = model({ web_search: 10, image_generation: 40 });
    expect(heldToolUses(responses(3, 'web_search', 'image_generation'), images, 'openai')).toEqual({
      ok: true,
      value: { image_generation: 3 },
    });
    const unpriced = refusal(heldToolUses(responses(3, 'image_generation'), priced, 'openai'));
    expect(unpriced).toMatchObject({ param: 'tools.0' });
    expect(unpriced.message).toContain('price.toolUses.image_generation');
    expect(refusal(heldToolUses(responses(null, 'image_generation'), images, 'openai')).param).toBe(
      'max_tool_calls',
    );
    const partial = (partialImages: unknown): OfferedTools => ({
      per: 'call',
      tools: [{ type: 'image_generation', param: 'tools.0', partialImages }],
      maxToolCalls: 1,
    });
    expect(refusal(heldToolUses(partial(2), images, 'openai')).param).toBe(
      'tools.0.partial_images',
    );
    expect(refusal(heldToolUses(partial('1'), images, 'openai')).param).toBe(
      'tools.0.partial_images',
    );
    expect(heldToolUses(partial(0), images, 'openai')).toEqual({
      ok: true,
      value: { image_generation: 1 },
    });
  });

  it('a stored prompt: held at max_tool_calls x the dearest fee kind, which the model must all price', () => {
    const all = model({
      web_search: 10,
      file_search: 2.5,
      code_interpreter: 30,
      image_generation: 40,
    });
    const prompt = (maxToolCalls: unknown, ...types: string[]): OfferedTools => ({
      ...(responses(maxToolCalls, ...types) as Extract<OfferedTools, { per: 'call' }>),
      storedPrompt: true,
    });
    expect(heldToolUses(prompt(2), all, 'openai')).toEqual({
      ok: true,
      value: { image_generation: 2 },
    });
    expect(heldToolUses(prompt(5, 'function', 'web_search'), all, 'openai')).toEqual({
      ok: true,
      value: { image_generation: 5 },
    });
    const unbound = refusal(heldToolUses(prompt(undefined), all, 'openai'));
    expect(unbound.param).toBe('max_tool_calls');
    expect(unbound.message).toContain('stored prompt');
    expect(refusal(heldToolUses(prompt(0), all, 'openai')).param).toBe('max_tool_calls');
    const none = refusal(heldToolUses(prompt(2), model(), 'openai'));
    expect(none).toMatchObject({ code: 'invalid_request', param: 'prompt' });
    expect(none.message).toContain('prices none of them');
    const some = refusal(heldToolUses(prompt(2), priced, 'openai'));
    expect(some.param).toBe('prompt');
    expect(some.message).toContain('price.toolUses.image_generation');
    expect(some.message).not.toContain('price.toolUses.web_search');
  });
});
