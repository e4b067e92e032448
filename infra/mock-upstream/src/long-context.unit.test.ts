import { describe, expect, it } from 'vitest';
import { anthropicClient, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const messages = [{ role: 'user' as const, content: 'Summarise the incident in one line.' }];

describe('long context', () => {
  it('marks a call whose billed input is above the line longContext, on every surface', async () => {
    const openai = mock.client();
    const line = { 'x-mock-long-context-above': '100' };
    // Over-reporting puts the input above the line, as a long prompt would.
    const above = { ...line, 'x-mock-overreport-prompt': '200' };
    await openai.chat.completions.create(
      { model: 'gpt-5.4', messages, max_tokens: 5 },
      { headers: line },
    );
    await openai.chat.completions
      .create(
        {
          model: 'gpt-5.4',
          messages,
          max_tokens: 5,
          stream: true,
          stream_options: { include_usage: true },
        },
        { headers: above },
      )
      .then(async (s) => {
        for await (const _ of s) void _;
      });
    await openai.responses.create(
      { model: 'gpt-5.4', input: 'hi', max_output_tokens: 16 },
      { headers: above },
    );
    await anthropicClient(mock.upstream()).messages.create(
      { model: 'claude-sonnet-4-5', max_tokens: 5, messages },
      { headers: above },
    );
    // No line: never long, whatever the size.
    await openai.chat.completions.create(
      { model: 'gpt-5.4', messages, max_tokens: 5 },
      { headers: { 'x-mock-overreport-prompt': '1000000' } },
    );
    const recent = mock.upstream().stats().recent;
    expect(recent.map((r) => [r.route, r.promptTokens > 100, r.longContext])).toEqual([
      ['chat.completions', false, false],
      ['chat.completions', true, true],
      ['responses', true, true],
      ['messages', true, true],
      ['chat.completions', true, false],
    ]);
  });

  it('takes the line from the behaviour, and refuses a bad header', async () => {
    mock.upstream().configure({ longContextAboveTokens: 1 });
    await mock.client().chat.completions.create({ model: 'gpt-5.4', messages, max_tokens: 5 });
    expect(mock.upstream().stats().recent.at(-1)?.longContext).toBe(true);
    const bad = await mock
      .client()
      .chat.completions.create(
        { model: 'gpt-5.4', messages, max_tokens: 5 },
        { headers: { 'x-mock-long-context-above': 'lots' } },
      )
      .catch((e: { status?: number }) => e);
    expect(bad).toMatchObject({ status: 400 });
  });
});
