import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const VERSION = { 'anthropic-version': '2023-06-01' };

const base = {
  model: 'claude-opus-4-7',
  messages: [{ role: 'user', content: 'Open the report.' }],
};

/** count_tokens of the body with these tools, and the input a create of it is billed. */
async function counted(
  tools: object[],
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<{ count: number; billed: number }> {
  const body = { ...base, tools, ...extra };
  const h = { ...VERSION, ...headers };
  const count = await call(mock.upstream(), 'POST', '/v1/messages/count_tokens', body, h);
  expect(count.status).toBe(200);
  const created = await call(
    mock.upstream(),
    'POST',
    '/v1/messages',
    { ...body, max_tokens: 20 },
    h,
  );
  expect(created.status).toBe(200);
  const billed = mock.upstream().stats().recent.at(-1)!.promptTokens;
  return { count: (count.json as { input_tokens: number }).input_tokens, billed };
}

/** The same definition as a custom tool: what the request shows of a built-in one. */
const shown = ({ type: _, ...rest }: { type: string; name: string }) => rest;

describe('Messages tools: the input Anthropic adds that the request does not show', () => {
  it('bills each built-in client tool its hidden definition, in count_tokens and the bill alike', async () => {
    const cases = [
      [{ type: 'bash_20250124', name: 'bash' }, 245],
      [{ type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' }, 700],
      [{ type: 'memory_20250818', name: 'memory' }, 900],
      // The computer tool's definition, and the computer-use system prompt.
      [{ type: 'computer_20250124', name: 'computer' }, 735 + 499],
    ] as const;
    for (const [tool, hidden] of cases) {
      const builtIn = await counted([tool]);
      const custom = await counted([shown(tool)]);
      // The type field itself is a few tokens of JSON the custom tool does not have.
      const typeField = builtIn.count - custom.count - hidden;
      expect(typeField, tool.type).toBeGreaterThan(0);
      expect(typeField, tool.type).toBeLessThan(12);
      expect(builtIn.billed).toBe(builtIn.count);
    }
  });

  it('adds the computer-use system prompt once, however many computer tools', async () => {
    const one = await counted([{ type: 'computer_20250124', name: 'computer' }]);
    const two = await counted([
      { type: 'computer_20250124', name: 'computer' },
      { type: 'computer_20251124', name: 'screen' },
    ]);
    const second = await counted([{ type: 'computer_20251124', name: 'screen' }]);
    const none = await counted([]);
    expect(two.count - one.count).toBe(second.count - none.count - 346 - 499);
  });

  it("counts a tool's every field (input_examples too), as Anthropic renders them", async () => {
    const tool = { name: 'lookup', input_schema: { type: 'object', properties: {} } };
    const plain = await counted([tool]);
    const examples = Array.from({ length: 20 }, (_, i) => ({
      account: `acct-${i}`,
      q: 'x'.repeat(40),
    }));
    const rich = await counted([{ ...tool, input_examples: examples }]);
    expect(rich.count - plain.count).toBeGreaterThan(200);
    expect(rich.billed).toBe(rich.count);
  });

  it("adds a guessed citations prompt once when any block, a tool result's included, enables citations", async () => {
    const result = (enabled: boolean) => ({
      type: 'search_result',
      source: 'https://example.test/a',
      title: 'A',
      content: [{ type: 'text', text: 'Revenue rose.' }],
      citations: { enabled },
    });
    const asked = async (blocks: object[]) => {
      const body = { ...base, messages: [{ role: 'user', content: blocks }] };
      const r = await call(mock.upstream(), 'POST', '/v1/messages/count_tokens', body, VERSION);
      return (r.json as { input_tokens: number }).input_tokens;
    };
    const off = await asked([result(false)]);
    const on = await asked([result(true)]);
    // "true" is a token shorter than "false" in o200k: the JSON differs by 1 at most.
    expect(Math.abs(on - off - 300)).toBeLessThanOrEqual(1);
    const nested = {
      type: 'tool_result',
      tool_use_id: 't1',
      content: [result(true), result(true)],
    };
    const twice = await asked([nested]);
    const once = await asked([{ ...nested, content: [result(true), result(false)] }]);
    expect(Math.abs(twice - once)).toBeLessThanOrEqual(1);
    expect(
      once - (await asked([{ ...nested, content: [result(false), result(false)] }])),
    ).toBeGreaterThanOrEqual(299);
  });

  it('takes the tool-use system prompt from the behaviour and from x-mock-tool-prompt-*', async () => {
    const tool = { name: 'lookup', input_schema: { type: 'object', properties: {} } };
    const any = { tool_choice: { type: 'any' } };
    const [auto, forced] = [await counted([tool]), await counted([tool], any)];
    expect(auto.count - forced.count).toBe(346 - 313);

    // A newer model's larger prompt (Opus 4.7's reported 675 / 804).
    mock.upstream().configure({ toolPromptTokens: { auto: 675, forced: 804 } });
    const newer = await counted([tool]);
    const newerForced = await counted([tool], any);
    expect(newer.count - auto.count).toBe(675 - 346);
    expect(newerForced.count - forced.count).toBe(804 - 313);
    expect([newer.billed, newerForced.billed]).toEqual([newer.count, newerForced.count]);

    // A header wins for its request only, in count_tokens and the bill.
    const headers = { 'x-mock-tool-prompt-auto': '1500', 'x-mock-tool-prompt-forced': '1600' };
    const byHeader = await counted([tool], {}, headers);
    expect(byHeader.count - auto.count).toBe(1500 - 346);
    expect(byHeader.billed).toBe(byHeader.count);
    expect((await counted([tool], any, headers)).count - forced.count).toBe(1600 - 313);
    expect((await counted([tool])).count).toBe(newer.count);
    // No tools, no tool-use system prompt.
    expect((await counted([], {}, headers)).count).toBeLessThan(30);

    const bad = await call(mock.upstream(), 'POST', '/v1/messages/count_tokens', base, {
      ...VERSION,
      'x-mock-tool-prompt-auto': 'lots',
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json)).toContain('x-mock-tool-prompt-auto');
  });
});
