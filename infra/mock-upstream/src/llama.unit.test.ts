import { describe, expect, it } from 'vitest';
import { call, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Count me <|endoftext|> please.' },
];

describe('llama-server tokenizer endpoints', () => {
  it('renders the chat template and tokenizes it; a template model reports that count as prompt_tokens', async () => {
    const template = await call(mock.upstream(), 'POST', '/apply-template', { messages });
    expect(template.status).toBe(200);
    const prompt = (template.json as { prompt: string }).prompt;
    expect(prompt).toBe(
      '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nCount me <|endoftext|> please.<|im_end|>\n<|im_start|>assistant\n',
    );
    const tokens = await call(mock.upstream(), 'POST', '/tokenize', { content: prompt });
    const count = (tokens.json as { tokens: number[] }).tokens.length;
    expect(count).toBeGreaterThan(20);
    const res = await mock.client().chat.completions.create({
      model: 'smollm2-135m-instruct',
      messages: messages as never,
      max_tokens: 4,
    });
    expect(res.usage?.prompt_tokens).toBe(count);
  });

  it('answers 400 to a body it cannot read', async () => {
    expect((await call(mock.upstream(), 'POST', '/apply-template', { messages: 'x' })).status).toBe(
      400,
    );
    expect((await call(mock.upstream(), 'POST', '/tokenize', { content: 5 })).status).toBe(400);
  });
});
