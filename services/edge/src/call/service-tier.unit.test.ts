import { parseConfig } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import { ChatTranscript } from '../surfaces/chat/transcript.js';
import { MessagesTranscript } from '../surfaces/messages/transcript.js';
import { ResponsesTranscript } from '../surfaces/responses/transcript.js';
import type { SseEvent } from '../upstream/sse.js';
import { heldServiceTier, reportedServiceTier } from './service-tier.js';

const tiers = {
  priority: { inputPerMTok: 2.5, outputPerMTok: 20, cachedInputPerMTok: 0.25 },
  flex: { inputPerMTok: 0.625, outputPerMTok: 5 },
};
const config = parseConfig({
  upstreams: [
    { id: 'openai', baseUrl: 'https://api.openai.com/v1' },
    { id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' },
  ],
  models: [
    { id: 'plain', upstream: 'openai', price: { inputPerMTok: 1.25, outputPerMTok: 10 } },
    {
      id: 'gpt-5',
      upstream: 'openai',
      price: { inputPerMTok: 1.25, outputPerMTok: 10, serviceTiers: tiers },
    },
    {
      id: 'gpt-5-priority-project',
      upstream: 'openai',
      price: {
        inputPerMTok: 1.25,
        outputPerMTok: 10,
        serviceTiers: tiers,
        autoServiceTier: 'priority',
      },
    },
    { id: 'sonnet', upstream: 'claude', price: { inputPerMTok: 3, outputPerMTok: 15 } },
    {
      id: 'sonnet-priority',
      upstream: 'claude',
      price: { inputPerMTok: 3, outputPerMTok: 15, serviceTiers: { priority: tiers.priority } },
    },
    {
      id: 'sonnet-flex-auto',
      upstream: 'claude',
      price: {
        inputPerMTok: 3,
        outputPerMTok: 15,
        serviceTiers: { flex: tiers.flex },
        autoServiceTier: 'flex',
      },
    },
  ],
});
if (!config.ok) throw new Error(config.error.errors.join('\n'));
const model = (id: string) => config.value.models.get(id)!;
const held = (asked: unknown, id: string) => {
  const m = model(id);
  const r = heldServiceTier(asked, m, m.api);
  return r.ok ? r.value : `400: ${r.error.param} ${r.error.message}`;
};

describe('heldServiceTier', () => {
  test('OpenAI: an explicit tier is held at its price; auto at the project default', () => {
    expect(held('priority', 'gpt-5')).toBe('priority');
    expect(held('flex', 'gpt-5')).toBe('flex');
    expect(held('default', 'gpt-5')).toBe('default');
    expect(held('auto', 'gpt-5')).toBe('default');
    expect(held(undefined, 'gpt-5')).toBe('default');
    expect(held(null, 'gpt-5')).toBe('default');
    expect(held('auto', 'gpt-5-priority-project')).toBe('priority');
    expect(held(undefined, 'gpt-5-priority-project')).toBe('priority');
    expect(held('default', 'gpt-5-priority-project')).toBe('default');
  });

  test('a tier that could be dearer with no price is a 400 naming service_tier and the fix', () => {
    expect(held('priority', 'plain')).toMatch(/^400: service_tier .*price\.serviceTiers\.priority/);
    expect(held('scale', 'gpt-5')).toMatch(/^400: service_tier .*price\.serviceTiers\.scale/);
    // flex unpriced is held (and billed) at the base price, which is dearer.
    expect(held('flex', 'plain')).toBe('default');
    expect(held('auto', 'plain')).toBe('default');
  });

  test('Messages: auto may be served at priority, so it is held there when priced', () => {
    expect(held(undefined, 'sonnet-priority')).toBe('priority');
    expect(held('auto', 'sonnet-priority')).toBe('priority');
    expect(held('standard_only', 'sonnet-priority')).toBe('default');
    expect(held('auto', 'sonnet')).toBe('default');
    // Anthropic serves auto at standard or priority, never at a cheaper autoServiceTier.
    expect(held('auto', 'sonnet-flex-auto')).toBe('default');
    expect(held(undefined, 'sonnet-flex-auto')).toBe('default');
    // OpenAI's names are not Anthropic's.
    expect(held('priority', 'sonnet-priority')).toMatch(
      /^400: service_tier service_tier "priority" is not/,
    );
    expect(held('standard_only', 'gpt-5')).toMatch(/^400: service_tier/);
  });

  test('a value of the wrong type, unknown or huge is a 400 that shows at most 64 characters', () => {
    expect(held(2, 'gpt-5')).toBe(
      '400: service_tier service_tier number is not one this API takes: auto, default, flex, scale, priority.',
    );
    expect(held({ tier: 'priority' }, 'gpt-5')).toMatch(/^400: service_tier service_tier object/);
    expect(held('PRIORITY', 'gpt-5')).toMatch(/^400: service_tier service_tier "PRIORITY"/);
    const huge = held('x'.repeat(1_000_000), 'gpt-5');
    expect(huge).toMatch(/^400: service_tier/);
    expect(huge.length).toBeLessThan(250);
  });

  test('a model the edge does not know prices no tier but the base', () => {
    expect(heldServiceTier('priority', undefined, 'openai').ok).toBe(false);
    expect(heldServiceTier('auto', undefined, 'openai')).toEqual({ ok: true, value: 'default' });
  });
});

test('reportedServiceTier: a tier name, else none (the tier held is billed)', () => {
  expect(reportedServiceTier('priority')).toBe('priority');
  expect(reportedServiceTier('standard')).toBe('standard');
  expect(reportedServiceTier(null)).toBeUndefined();
  expect(reportedServiceTier(7)).toBeUndefined();
  expect(reportedServiceTier('Priority; DROP')).toBeUndefined();
  expect(reportedServiceTier('p'.repeat(33))).toBeUndefined();
});

describe('the tier each surface reports', () => {
  const sse = (data: object, event?: string): SseEvent => ({ event, data: JSON.stringify(data) });

  test('chat: the chunks name it (the last one wins); an unnamed stream reports none', () => {
    const t = new ChatTranscript({ assemble: false, wantsUsage: false, model: 'm' });
    t.accept(
      sse({ id: 'c', choices: [{ index: 0, delta: { content: 'hi' } }], service_tier: 'priority' }),
    );
    expect(t.serviceTier()).toBe('priority');
    t.accept(
      sse({
        id: 'c',
        choices: [],
        usage: { prompt_tokens: 1, completion_tokens: 1 },
        service_tier: 'default',
      }),
    );
    expect(t.serviceTier()).toBe('default');
    const none = new ChatTranscript({ assemble: false, wantsUsage: false, model: 'm' });
    none.accept(sse({ choices: [{ index: 0, delta: { content: 'hi' } }] }));
    expect(none.serviceTier()).toBeUndefined();
  });

  test('responses: the response object names it, the terminal one over the first', () => {
    const t = new ResponsesTranscript({ model: 'm' });
    t.accept(sse({ type: 'response.created', response: { id: 'r', service_tier: 'auto' } }));
    expect(t.serviceTier()).toBe('auto');
    t.accept(sse({ type: 'response.completed', response: { id: 'r', service_tier: 'priority' } }));
    expect(t.serviceTier()).toBe('priority');
  });

  test("messages: Anthropic's usage names it from message_start", () => {
    const t = new MessagesTranscript({ model: 'claude' });
    t.accept(
      sse(
        {
          type: 'message_start',
          message: {
            id: 'msg',
            usage: { input_tokens: 5, output_tokens: 1, service_tier: 'priority' },
          },
        },
        'message_start',
      ),
    );
    expect(t.serviceTier()).toBe('priority');
  });
});
