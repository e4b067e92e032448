import { afterEach, describe, expect, test } from 'vitest';
import { KEY, unitCall, type UnitCall } from '../../test/call-deps.js';

/**
 * The tool uses a call offering priced provider-run tools settles (forward-call.ts `settle`):
 * the provider's report when its final usage came; without it (a stream cut before the
 * terminal event), the bound held on each kind, or the uses the stream showed where more.
 */
let u: UnitCall | undefined;
afterEach(async () => {
  await u?.close();
  u = undefined;
});

const headers = { authorization: `Bearer ${KEY}` };

async function settled(x: UnitCall) {
  for (let i = 0; i < 200 && x.authority.settles.length + x.authority.releases.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  expect(x.authority.releases).toEqual([]);
  return x.authority.settles[0]!.usage;
}

function searchMessage(x: UnitCall, stream: boolean) {
  const payload = {
    model: 'claude-search',
    max_tokens: 100,
    stream,
    messages: [{ role: 'user', content: 'what happened today' }],
    tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }],
  };
  return x.app.inject({ method: 'POST', url: '/v1/messages', headers, payload });
}

function searchResponse(x: UnitCall, stream: boolean) {
  const payload = {
    model: 'gpt-search',
    max_output_tokens: 100,
    stream,
    input: 'what happened today',
    tools: [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_1'] }],
    max_tool_calls: 3,
  };
  return x.app.inject({ method: 'POST', url: '/v1/responses', headers, payload });
}

describe('settle: tool uses of a call offering priced tools', () => {
  test('Messages, the final usage came: the searches Anthropic reported', async () => {
    u = await unitCall({ mock: { toolUses: 2 } });
    await searchMessage(u, true);
    expect((await settled(u)).toolUses).toEqual({ web_search: 2, web_fetch: 0 });
  });

  test('Messages, cut before the final usage: the max_uses held (3), not the 2 searches seen', async () => {
    u = await unitCall({ mock: { toolUses: 2 } });
    u.upstream.failNext({ status: 'error', afterTokens: 5 });
    const res = await searchMessage(u, true);
    expect(res.body).toContain('event: error');
    expect((await settled(u)).toolUses).toEqual({ web_search: 3 });
    expect(u.upstream.stats().recent[0]!.toolUses).toEqual({ web_search: 2 });
  });

  test('Messages, an upstream past its max_uses cut: the searches it showed (an overrun)', async () => {
    u = await unitCall({ mock: { toolUses: 5, ignoreToolBound: true } });
    // Past the five searches' blocks (their names and inputs are output the model writes).
    u.upstream.failNext({ status: 'error', afterTokens: 60 });
    await searchMessage(u, false);
    expect((await settled(u)).toolUses).toEqual({ web_search: 5 });
  });

  test('Responses, the final response came: its tool call items, each at its own kind', async () => {
    u = await unitCall({ mock: { toolUses: 1 } });
    await searchResponse(u, true);
    expect((await settled(u)).toolUses).toEqual({ web_search: 1, file_search: 1 });
    // The settle names the model (no upstream capacity here): a use reported that nothing
    // held is billed at its current price, never at none.
    expect(u.authority.settles[0]).toMatchObject({ model: 'gpt-search' });
    expect(u.authority.settles[0]).not.toHaveProperty('upstream');
  });

  test('Responses, cut before the terminal event: the calls seen, the rest of max_tool_calls at the dearest (as held)', async () => {
    u = await unitCall({ mock: { toolUses: 1 } });
    u.upstream.failNext({ status: 'error', afterTokens: 5 });
    const res = await searchResponse(u, true);
    expect(res.body).toContain('event: error');
    // Held 3 web searches ($0.03); billed 1 file search and 2 web searches ($0.0225).
    expect((await settled(u)).toolUses).toEqual({ web_search: 2, file_search: 1 });
  });
});

function searchChat(x: UnitCall, model: string, stream: boolean) {
  const payload = {
    model,
    max_tokens: 100,
    stream,
    messages: [{ role: 'user', content: 'what happened today' }],
    web_search_options: { search_context_size: 'low' },
  };
  return x.app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload });
}

describe('Chat Completions search models: one web search a call, held and billed', () => {
  test.each([false, true])(
    'answered (stream %s): held one search, billed one, as the provider',
    async (stream) => {
      u = await unitCall();
      const res = await searchChat(u, 'gpt-4o-search-preview', stream);
      expect(res.statusCode).toBe(200);
      // web_search_options goes to a search model (its context size is the client's).
      expect(res.headers['x-holdfast-dropped-fields']).toBeUndefined();
      expect(u.authority.admits[0]!.toolUses).toEqual({ web_search: 1 });
      expect((await settled(u)).toolUses).toEqual({ web_search: 1 });
      expect(u.upstream.stats().recent[0]!.toolUses).toEqual({ web_search: 1 });
    },
  );

  test('cut before the usage chunk: billed the search held', async () => {
    u = await unitCall();
    u.upstream.failNext({ status: 'error', afterTokens: 5 });
    const res = await searchChat(u, 'gpt-4o-search-preview', true);
    expect(res.body).toContain('error');
    const usage = await settled(u);
    expect(usage.toolUses).toEqual({ web_search: 1 });
  });

  test('refused by the upstream, retries included (it answered no call): released, no search billed', async () => {
    u = await unitCall();
    u.upstream.failNext({ status: 500, count: 3 });
    const res = await searchChat(u, 'gpt-4o-search-preview', false);
    expect(res.statusCode).toBeGreaterThanOrEqual(500);
    for (let i = 0; i < 200 && u.authority.releases.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(u.authority.settles).toEqual([]);
    expect(u.authority.releases).toHaveLength(1);
  });

  test('a model that prices web_search for Responses is no search model on chat', async () => {
    u = await unitCall();
    const res = await searchChat(u, 'gpt-search', false);
    expect(res.headers['x-holdfast-dropped-fields']).toBe('web_search_options');
    expect(u.authority.admits[0]!.toolUses).toBeUndefined();
    expect((await settled(u)).toolUses).toBeUndefined();
  });
});
