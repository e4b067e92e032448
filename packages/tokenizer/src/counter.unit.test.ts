import { afterEach, describe, expect, it } from 'vitest';
import { countChatPrompt } from './chat.js';
import { TokenCounter } from './counter.js';
import { estimateChatPrompt } from './estimate.js';
import type { CountJob } from './job.js';
import { loadTokenizer } from './tokenizers.js';
import type { ChatPromptRequest, PromptContentPart } from './types.js';

const paragraph =
  'Holdfast reserves the worst case of each call before it reaches the model, settles to the real usage, and releases on every failure path. ';

function longChat(chars: number): ChatPromptRequest {
  return {
    model: 'gpt-4o',
    messages: [
      { role: 'system', content: 'You summarise documents.' },
      { role: 'user', content: paragraph.repeat(Math.ceil(chars / paragraph.length)) },
    ],
  };
}

let counter: TokenCounter | undefined;
afterEach(async () => {
  await counter?.close();
  counter = undefined;
});

describe('TokenCounter', () => {
  it('counts long prompts in a worker, short ones inline, with the same result', async () => {
    counter = new TokenCounter({ inlineMaxChars: 10_000, poolSize: 2 });
    const long = longChat(40_000);
    const short = longChat(1_000);
    const [pooled, inline] = await Promise.all([
      counter.countChat(long, 'o200k_base'),
      counter.countChat(short, 'o200k_base'),
    ]);
    const o200k = await loadTokenizer('o200k_base');
    expect(pooled).toBe(countChatPrompt(long, o200k));
    expect(inline).toBe(countChatPrompt(short, o200k));
    expect(counter.stats()).toMatchObject({ inline: 1, pooled: 1, workers: 1 });
  });

  it("spreads concurrent tenants' jobs over the pool and agrees with inline counts for both encodings", async () => {
    counter = new TokenCounter({ inlineMaxChars: 0, poolSize: 2 });
    const requests = [1_000, 2_000, 3_000, 4_000].map(longChat);
    // One tenant runs on all workers but one; two fill the pool.
    const counts = await Promise.all(
      requests.flatMap((r) => [
        counter!.countChat(r, 'o200k_base', { tenant: 'a' }),
        counter!.countChat(r, 'cl100k_base', { tenant: 'b' }),
      ]),
    );
    const [o200k, cl100k] = await Promise.all([
      loadTokenizer('o200k_base'),
      loadTokenizer('cl100k_base'),
    ]);
    expect(counts).toEqual(
      requests.flatMap((r) => [countChatPrompt(r, o200k), countChatPrompt(r, cl100k)]),
    );
    expect(counter.stats().workers).toBe(2);
  });

  it('counts embeddings input; estimate inline while cheap, in a worker when large', async () => {
    counter = new TokenCounter({ poolSize: 1 });
    expect(await counter.countEmbedding(['2 + 2 = 4', 'お誕生日おめでとう'], 'cl100k_base')).toBe(
      16,
    );
    const small = longChat(30_000);
    const large = longChat(40_000);
    expect(await counter.countChat(small, 'estimate')).toBe(estimateChatPrompt(small));
    expect(counter.stats()).toMatchObject({ inline: 2, pooled: 0 });
    expect(await counter.countChat(large, 'estimate')).toBe(estimateChatPrompt(large));
    expect(counter.stats()).toMatchObject({ inline: 2, pooled: 1 });
  }, 30_000);

  it('sizes every part it counts: an audio part, small in text, goes to a worker', async () => {
    counter = new TokenCounter({ poolSize: 1 });
    const audio: ChatPromptRequest = {
      model: 'gpt-4o-audio-preview',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Transcribe this.' },
            { type: 'input_audio', input_audio: { data: 'UklGR'.repeat(4_000), format: 'wav' } },
          ] as PromptContentPart[],
        },
      ],
    };
    const o200k = await loadTokenizer('o200k_base');
    expect(await counter.countChat(audio, 'o200k_base')).toBe(countChatPrompt(audio, o200k));
    expect(counter.stats()).toMatchObject({ inline: 0, pooled: 1 });
  }, 30_000);

  it('counts open-weight families only in workers, whatever the size', async () => {
    counter = new TokenCounter({ poolSize: 1 });
    expect(await counter.countChat(longChat(100), 'llama3')).toBeGreaterThan(20);
    expect(counter.stats()).toMatchObject({ inline: 0, pooled: 1 });
  }, 60_000);

  it('sends the counts of a tenant whose inline counts ran long to the pool, and only its', async () => {
    counter = new TokenCounter({ poolSize: 1, inlineGuard: { budgetMs: 0, burstMs: 0 } });
    const slow = { tenant: 'slow' };
    await counter.countChat(longChat(4_000), 'o200k_base', slow);
    expect(counter.stats()).toMatchObject({ inline: 1, pooled: 0 });
    await counter.countChat(longChat(100), 'o200k_base', slow);
    expect(counter.stats()).toMatchObject({ inline: 1, pooled: 1 });
    await counter.countChat(longChat(100), 'o200k_base', { tenant: 'other' });
    expect(counter.stats()).toMatchObject({ inline: 2, pooled: 1 });
  }, 30_000);

  it('rejects a count that fails in a worker, and the worker keeps serving', async () => {
    counter = new TokenCounter({ inlineMaxChars: 0, poolSize: 1 });
    const bad = {
      kind: 'chat',
      tokenizer: 'p50k_base',
      request: longChat(100),
    } as unknown as CountJob;
    await expect(counter.count(bad)).rejects.toThrow(/token count failed/);
    expect(await counter.countChat(longChat(100), 'o200k_base')).toBeGreaterThan(20);
    expect(counter.stats().workers).toBe(1);
  });

  it('rejects counts after close', async () => {
    counter = new TokenCounter({ inlineMaxChars: 0, poolSize: 1 });
    await counter.warmUp(['o200k_base']);
    expect(counter.stats().workers).toBe(1);
    await counter.close();
    await expect(counter.countChat(longChat(100), 'o200k_base')).rejects.toThrow(/closed/);
  });
});
