import { afterEach, describe, expect, it, vi } from 'vitest';
import { Batcher } from './batcher.js';
import type { AdmitRequest, Batch } from './protocol.js';

const caller = { tenant: 't', org: 'o', keyId: 'k', useCase: 'u', model: 'm' };
const admit = (prompt: number): AdmitRequest => ({ ...caller, prompt, maxTokens: 10 });
const turn = () => new Promise((r) => setImmediate(r));

describe('Batcher', () => {
  afterEach(() => vi.useRealTimers());

  function batcher(timeoutMs = 1_000) {
    const sent: Array<{ subject: string; batch: Batch; reply: string }> = [];
    const b = new Batcher({
      publish: (subject, data, reply) => sent.push({ subject, batch: JSON.parse(data), reply }),
      inbox: '_INBOX.x',
      timeoutMs,
    });
    return { b, sent };
  }

  it('sends the requests of one turn as one batch and answers each from its place in the reply', async () => {
    const { b, sent } = batcher();
    const one = b.request('admit', admit(1));
    const two = b.request('settle', { ...caller, reservationId: 'r', prompt: 1, completion: 2 });
    await turn();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.subject).toBe('floor.authority.batch');
    expect(sent[0]!.reply).toBe('_INBOX.x.1');
    expect(sent[0]!.batch.items.map((i) => i.op)).toEqual(['admit', 'settle']);
    b.reply('_INBOX.x.1', JSON.stringify([{ ok: true, reservationId: 'r1' }, { ok: true }]));
    expect(await one).toEqual({ ok: true, reservationId: 'r1' });
    expect(await two).toEqual({ ok: true });
  });

  it('sends a request of a later turn in a batch of its own', async () => {
    const { b, sent } = batcher();
    void b.request('admit', admit(1));
    await turn();
    const later = b.request('admit', admit(2));
    await turn();
    expect(sent.map((s) => s.reply)).toEqual(['_INBOX.x.1', '_INBOX.x.2']);
    expect(sent[1]!.batch.items).toEqual([{ op: 'admit', body: admit(2) }]);
    b.reply('_INBOX.x.2', JSON.stringify([{ ok: false, code: 'duplicate' }]));
    expect(await later).toEqual({ ok: false, code: 'duplicate' });
  });

  it('fails the requests of a batch with no reply in time, and ignores a late one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { b } = batcher(50);
    const lost = b.request('admit', admit(1));
    await turn();
    vi.advanceTimersByTime(50);
    await expect(lost).rejects.toThrow(/no reply within 50 ms/);
    expect(() => b.reply('_INBOX.x.1', '[{"ok":true}]')).not.toThrow();
  });
});
