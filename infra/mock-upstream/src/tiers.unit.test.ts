import { describe, expect, it } from 'vitest';
import { anthropicClient, useMockUpstream } from '../test/harness.js';

const mock = useMockUpstream();
const messages = [{ role: 'user' as const, content: 'Summarise the incident in one line.' }];

/** Every tier a stream reports (chat chunks, the Responses objects). */
async function streamedTiers(stream: AsyncIterable<unknown>): Promise<Set<unknown>> {
  const tiers = new Set<unknown>();
  for await (const event of stream) {
    const e = event as { service_tier?: unknown; response?: { service_tier?: unknown } };
    if (e.service_tier !== undefined) tiers.add(e.service_tier);
    if (e.response?.service_tier !== undefined) tiers.add(e.response.service_tier);
  }
  return tiers;
}

describe('service tiers', () => {
  it('chat and responses serve the tier asked (auto: default), JSON and stream, and log it', async () => {
    const openai = mock.client();
    const chat = (service_tier?: 'priority' | 'flex' | 'auto') =>
      openai.chat.completions.create({ model: 'gpt-5', messages, max_tokens: 20, service_tier });
    expect((await chat('priority')).service_tier).toBe('priority');
    expect((await chat('flex')).service_tier).toBe('flex');
    expect((await chat('auto')).service_tier).toBe('default');
    expect((await chat()).service_tier).toBe('default');
    const streamed = await openai.chat.completions.create({
      model: 'gpt-5',
      messages,
      max_tokens: 20,
      service_tier: 'priority',
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(await streamedTiers(streamed)).toEqual(new Set(['priority']));

    const response = await openai.responses.create({
      model: 'gpt-5',
      input: 'hi',
      max_output_tokens: 20,
      service_tier: 'priority',
    });
    expect(response.service_tier).toBe('priority');
    const events = await openai.responses.create({
      model: 'gpt-5',
      input: 'hi',
      max_output_tokens: 20,
      service_tier: 'flex',
      stream: true,
    });
    expect(await streamedTiers(events)).toEqual(new Set(['flex']));
    const tiers = mock
      .upstream()
      .stats()
      .recent.map((r) => r.serviceTier);
    expect(tiers).toEqual([
      'priority',
      'flex',
      'default',
      'default',
      'priority',
      'priority',
      'flex',
    ]);
  });

  it('downgradePriority serves that share of priority calls at default, in turn', async () => {
    mock.upstream().configure({ downgradePriority: 0.5 });
    const openai = mock.client();
    const tiers: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await openai.chat.completions.create({
        model: 'gpt-5',
        messages,
        max_tokens: 20,
        service_tier: 'priority',
      });
      tiers.push(r.service_tier);
    }
    expect(tiers).toEqual(['priority', 'default', 'priority', 'default']);
    // Calls at other tiers are not counted in the share.
    const flex = await openai.chat.completions.create({
      model: 'gpt-5',
      messages,
      max_tokens: 20,
      service_tier: 'flex',
    });
    expect(flex.service_tier).toBe('flex');
  });

  it('messages: auto at priority when the account has Priority Tier, standard_only at standard', async () => {
    const claude = anthropicClient(mock.upstream());
    const ask = (service_tier?: 'auto' | 'standard_only') =>
      claude.messages.create({ model: 'claude', max_tokens: 20, messages, service_tier });
    expect((await ask('auto')).usage.service_tier).toBe('standard');
    mock.upstream().configure({ priorityTier: true });
    expect((await ask()).usage.service_tier).toBe('priority');
    expect((await ask('standard_only')).usage.service_tier).toBe('standard');
    const stream = claude.messages.stream({ model: 'claude', max_tokens: 20, messages });
    const tiers = new Set<unknown>();
    for await (const e of stream) {
      if (e.type === 'message_start') tiers.add(e.message.usage.service_tier);
    }
    expect(tiers).toEqual(new Set(['priority']));
    expect((await stream.finalMessage()).usage.service_tier).toBe('priority');
  });

  it('x-mock-service-tier names the tier reported for one call', async () => {
    const r = await mock
      .client()
      .chat.completions.create(
        { model: 'gpt-5', messages, max_tokens: 20, service_tier: 'priority' },
        { headers: { 'x-mock-service-tier': 'scale' } },
      );
    expect(r.service_tier).toBe('scale');
  });
});
