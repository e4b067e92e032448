import type { ServerResponse } from 'node:http';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, testConfig, type TestConfig } from './harness.js';
import { scriptedStack } from './scripted-upstream.js';

/**
 * An adaptive call whose hold cannot grow any more ends at what its hold covers, not where the
 * refusal found it (CI, hostile.admin-flight: a call cut at 49 output tokens while its hold
 * covered 107, the admin having lowered the limit as it streamed). The edge asks for more a
 * quarter of the cover ahead; the refusal used to end the call at once, so the client got (and
 * the team paid for) up to a quarter of its cover less than its hold allowed. The scripted
 * upstream stalls after it wrote past the point of the ask until the refusal is in, so where
 * the call ends depends on no timing.
 */

const TEAM = 'batch-summariser';
/** The output the estimate learns (3 calls), the hold's first cover. */
const LEARNED = 50;
/** The cover the first growth reaches: the window's room after the hold. */
const COVER = 200;
/** The edge stops passing output this many tokens before the end of a cover it cannot grow. */
const STOP_BEFORE = 16;
/** Written before the stall: past where the edge asks for more (COVER - 64), short of its end. */
const BEFORE_STALL = 150;

const adaptive = (limit: number) => (c: TestConfig) => {
  const t = entry(c.tenants, TEAM);
  t.mode = 'adaptive';
  t.adaptive = { percentile: 0.95, minSamples: 3, samples: 20 };
  t.budgets = [{ window: 'month', limit, unit: 'tokens' }];
};

const chunk = (extra: object) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', ...extra })}\n\n`;
const content = (n: number) =>
  Array.from({ length: n }, () =>
    chunk({ choices: [{ index: 0, delta: { content: ' budget' }, finish_reason: null }] }),
  );
const end = (completion: number) => [
  chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
  chunk({
    choices: [],
    usage: { prompt_tokens: 30, completion_tokens: completion, total_tokens: 30 + completion },
  }),
  'data: [DONE]\n\n',
];

function writeAll(res: ServerResponse, events: string[]): void {
  for (const e of events) if (!res.destroyed) res.write(e);
}

test('an adaptive call whose hold cannot grow goes on to the end of its cover, then ends at length', async ({
  stack,
}) => {
  const { s, up } = await scriptedStack(stack, 'default', adaptive(40_000));
  const refused = async () => {
    const text = (await s.edge.app.inject({ method: 'GET', url: '/metrics' })).body;
    const line = text
      .split('\n')
      .find((l) => /^edge_hold_extensions_total\{status="refused"/.test(l));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  const call = () =>
    fetch(`${s.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEYS.batch}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'report budget report budget' }],
        max_tokens: 1_024,
        stream: true,
      }),
    });

  // The estimate learns LEARNED tokens of output.
  up.next((res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    writeAll(res, [...content(LEARNED), ...end(LEARNED)]);
    res.end();
  });
  let prompt = 0;
  for (let i = 0; i < 3; i++) {
    const r = await call();
    prompt = Number(r.headers.get('x-holdfast-prompt-tokens'));
    await r.text();
  }
  const learned = (await s.settled(TEAM)).billedTokens;
  expect(learned).toBe(3 * (30 + LEARNED));
  // Room for the next call's hold (its prompt + LEARNED) and COVER - LEARNED more output: its
  // first growth covers COVER, the next one is refused.
  const applied = await s.client.configApply({
    document: testConfig(s.upstream.url, (c) => {
      adaptive(learned + prompt + COVER)(c);
      entry(c.upstreams, 'default').baseUrl = up.url;
      entry(c.upstreams, 'default').maxRetries = 0;
    }),
  });
  expect(applied.ok).toBe(true);
  await s.edge.app.configSnapshot.refresh();

  // Past the ask, then a stall until the authority refused it, then far more than the cover.
  up.next((res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    writeAll(res, content(BEFORE_STALL));
    void waitFor(async () => (await refused()) >= 1 || undefined, {
      what: 'the growth refused',
    }).then(() => {
      writeAll(res, [...content(600), ...end(BEFORE_STALL + 600)]);
      res.end();
    });
  });
  const r = await call();
  expect(Number(r.headers.get('x-holdfast-held'))).toBe(prompt + LEARNED);
  const text = await r.text();
  const written = text.split('"content":" budget"').length - 1;

  const events = await s.events(
    (es) => es.filter((e) => e.type === 'reservation.settled').length === 4,
  );
  const grown = events.filter((e) => e.type === 'reservation.extended');
  expect(grown.map((e) => e.type === 'reservation.extended' && e.coveredOutputTokens)).toEqual([
    COVER,
  ]);
  expect(await refused()).toBe(1);
  // Ended 16 tokens before the end of its cover (the margin for the tokens in flight), as a
  // call whose growth is refused there: not where the refusal came (BEFORE_STALL).
  expect(written).toBe(COVER - STOP_BEFORE);
  expect(text).toContain('"finish_reason":"length"');
  expect(text).toContain('"code":"budget_exceeded"');
  const id = grown[0]?.type === 'reservation.extended' ? grown[0].reservationId : '';
  const settled = events.find((e) => e.type === 'reservation.settled' && e.reservationId === id);
  expect(settled).toMatchObject({ outcome: 'budget_exhausted' });
  // Billed what the edge read (the event it held back too), within the hold.
  expect(settled?.type === 'reservation.settled' && settled.completionTokens).toBe(
    COVER - STOP_BEFORE + 1,
  );
  expect(settled?.type === 'reservation.settled' && settled.billedTokens).toBe(
    prompt + COVER - STOP_BEFORE + 1,
  );
  const usage = await s.settled(TEAM);
  expect(usage.windows[0]!.used).toBeLessThanOrEqual(usage.windows[0]!.limit);
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
});
