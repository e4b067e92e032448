import { expect } from 'vitest';
import { edgeTest as test, KEYS } from './harness.js';
import { words } from './surfaces.js';

test('responses.create, not streaming: admitted, answered, settled to the provider usage, recorded as responses', async ({
  stack,
}) => {
  const s = await stack();
  const { data, response } = await s
    .openai(KEYS.support)
    .responses.create({ model: 'gpt-4o-mini', input: words(20), max_output_tokens: 100 })
    .withResponse();
  expect(data.status).toBe('completed');
  expect(data.output_text.split(' ')).toHaveLength(50);
  const prompt = data.usage?.input_tokens;
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(prompt));
  expect(response.headers.get('x-holdfast-held')).toBe(String(prompt! + 100));
  expect(s.upstream.stats().recent[0]).toMatchObject({
    route: 'responses',
    stream: true,
    maxTokens: 100,
  });
  expect((await s.settled('support-bot')).billedTokens).toBe(prompt! + 50);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.created')).toMatchObject({ api: 'responses' });
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    api: 'responses',
    promptTokens: prompt,
    completionTokens: 50,
  });
});

test('responses.create, streaming: typed events pass through, response.completed carries the usage', async ({
  stack,
}) => {
  const s = await stack();
  const stream = await s.openai(KEYS.support).responses.create({
    model: 'gpt-4o-mini',
    instructions: 'Answer briefly.',
    input: [{ role: 'user', content: [{ type: 'input_text', text: words(10) }] }],
    stream: true,
  });
  const types: string[] = [];
  let text = '';
  let usage: unknown;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') usage = event.response.usage;
  }
  expect(types[0]).toBe('response.created');
  expect(types.at(-1)).toBe('response.completed');
  expect(text.split(' ')).toHaveLength(50);
  expect(usage).toMatchObject({ output_tokens: 50 });
  const recent = s.upstream.stats().recent[0]!;
  expect(recent.maxTokens).toBe(512);
  expect((await s.settled('support-bot')).billedTokens).toBe(recent.promptTokens + 50);
});
