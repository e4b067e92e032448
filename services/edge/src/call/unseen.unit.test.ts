import type { CompiledModel } from '@holdfast/config';
import { Ok } from '@holdfast/runtime';
import { describe, expect, it } from 'vitest';
import { messagesProviderTools } from '../surfaces/messages/hidden.js';
import {
  perCallReads,
  perToolReads,
  responsesProviderTools,
  withProviderTool,
  type ProviderTool,
} from './unseen.js';

const model = (more: Partial<CompiledModel> = {}) =>
  ({ id: 'm', upstreamStateAllowanceTokens: 6_000, ...more }) as CompiledModel;

const search = (max_uses?: unknown) => ({
  type: 'web_search_20250305',
  name: 'web_search',
  ...(max_uses === undefined ? {} : { max_uses }),
});
const code = { type: 'code_execution_20250825', name: 'code_execution' };
const mcp = { type: 'url', url: 'https://mcp.example.test', name: 'docs' };

/** What a Messages or Responses call is admitted with over a prompt counted at 1,000. */
function held(
  tools: readonly ProviderTool[],
  reads: Parameters<typeof withProviderTool>[2],
  m = model(),
) {
  return withProviderTool(tools, m, reads, () => Promise.resolve(Ok(1_000)));
}

const refusal = async (p: ReturnType<typeof held>) => {
  const r = await p;
  if (r.ok) throw new Error(`expected a 400, got ${r.value}`);
  return { param: r.error.param, message: r.error.message };
};

describe('the input of the tools the provider runs: an allowance a read', () => {
  it('Messages: a search or a fetch is held its allowance for each of its max_uses; code execution and an MCP server once', async () => {
    const tools = messagesProviderTools({
      tools: [search(20), { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 3 }, code],
      mcp_servers: [mcp],
    });
    expect(perToolReads(tools)).toEqual(Ok({ reads: 20 + 3 + 1 + 1, param: 'tools.0.max_uses' }));
    expect(await held(tools, perToolReads)).toEqual(Ok(1_000 + 25 * 6_000));
    // No tool bounded by its uses: one allowance each, as before.
    const once = messagesProviderTools({ tools: [code], mcp_servers: [mcp] });
    expect(await held(once, perToolReads)).toEqual(Ok(1_000 + 2 * 6_000));
  });

  it('Messages: a search or a fetch without a max_uses the client set, or a wrong one, is a 400 naming it', async () => {
    const cases: [unknown, string][] = [
      [undefined, 'set its max_uses'],
      [null, 'set its max_uses'],
      [0, 'integer from 1 to 1,000'],
      [1_001, 'integer from 1 to 1,000'],
      [2.5, 'integer from 1 to 1,000'],
      ['20', 'integer from 1 to 1,000'],
    ];
    for (const [bound, says] of cases) {
      const tools = messagesProviderTools({ tools: [code, search(bound)] });
      const r = await refusal(held(tools, perToolReads));
      expect(r.param).toBe('tools.1.max_uses');
      expect(r.message).toContain(says);
    }
    const fetch = messagesProviderTools({ tools: [{ type: 'web_fetch_20250910', name: 'f' }] });
    expect((await refusal(held(fetch, perToolReads))).param).toBe('tools.0.max_uses');
  });

  it('Responses: max_tool_calls reads for all the tools, one more for each tool whose calls are not counted, never fewer than one a tool', async () => {
    const reads = (tools: readonly object[], max: unknown) =>
      held(responsesProviderTools(tools as { type: string }[]), (t) => perCallReads(t, max));
    const web = { type: 'web_search' };
    const files = { type: 'file_search', vector_store_ids: ['vs_1'] };
    const server = { type: 'mcp', server_label: 'docs' };
    expect(await reads([web], 20)).toEqual(Ok(1_000 + 20 * 6_000));
    expect(await reads([web, files, server], 20)).toEqual(Ok(1_000 + 21 * 6_000));
    expect(await reads([web, files, server], 1)).toEqual(Ok(1_000 + 3 * 6_000));
    // The client's own tools read nothing unseen.
    expect(await reads([{ type: 'function', name: 'f' }], undefined)).toEqual(Ok(1_000));
    // Any tool the provider runs needs max_tool_calls: an MCP server is no exception.
    for (const [tools, max, says] of [
      [[server], undefined, 'set max_tool_calls'],
      [[web], null, 'set max_tool_calls'],
      [[web], 0, 'integer from 1 to 1,000'],
      [[web], 5_000, 'integer from 1 to 1,000'],
    ] as const) {
      const r = await refusal(reads(tools, max));
      expect(r.param).toBe('max_tool_calls');
      expect(r.message).toContain(says);
    }
  });

  it("reads held past the model's maxPromptTokens or the limit on a prompt are a 400 naming the bound, never an overflow", async () => {
    const tools = messagesProviderTools({ tools: [search(1_000)] });
    // 1,000 x 6,000 = 6,000,000, above the 4,000,000 a prompt may have.
    const limit = await refusal(held(tools, perToolReads));
    expect(limit.param).toBe('tools.0.max_uses');
    expect(limit.message).toContain('6,000,000');
    expect(limit.message).toContain('4,000,000');
    // The largest allowance times the largest bound is still an exact integer.
    const huge = model({ upstreamStateAllowanceTokens: 4_000_000 });
    expect((await refusal(held(tools, perToolReads, huge))).message).toContain('4,000,000,000');
    const short = model({ maxPromptTokens: 100_000 });
    const twenty = messagesProviderTools({ tools: [search(20)] });
    const capped = await refusal(held(twenty, perToolReads, short));
    expect(capped.param).toBe('tools.0.max_uses');
    expect(capped.message).toContain("model m's maxPromptTokens (100,000)");
    expect(await held(messagesProviderTools({ tools: [search(16)] }), perToolReads, short)).toEqual(
      Ok(1_000 + 16 * 6_000),
    );
    const gpt = responsesProviderTools([{ type: 'web_search' }]);
    const calls = await refusal(held(gpt, (t) => perCallReads(t, 1_000)));
    expect(calls.param).toBe('max_tool_calls');
  });

  it('without an allowance the first tool is refused, before its bound is read', async () => {
    const tools = messagesProviderTools({ tools: [search()] });
    const none = model({ upstreamStateAllowanceTokens: undefined });
    const r = await refusal(held(tools, perToolReads, none));
    expect(r.param).toBe('tools.0');
    expect(r.message).toContain('upstreamStateAllowanceTokens');
  });
});
