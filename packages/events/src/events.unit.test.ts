import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkEvent, parseEvent } from './events.js';
import { Usage } from './authority/settle.js';
import { TenantId } from './ids.js';
import { windowCharge } from './windows.js';

const settled = {
  id: randomUUID(),
  schemaVersion: 1,
  time: new Date().toISOString(),
  tenant: 'batch-summariser',
  org: 'batch-summariser',
  type: 'reservation.settled',
  reservationId: randomUUID(),
  keyId: 'batch-1',
  useCase: 'UC-112',
  model: 'gpt-4o-mini',
  mode: 'reserve',
  heldTokens: 1394,
  heldMicroUsd: 670,
  promptTokens: 370,
  completionTokens: 1024,
  cachedPromptTokens: 0,
  billedTokens: 1394,
  costMicroUsd: 670,
  chargedTokens: 1394,
  chargedMicroUsd: 670,
  outcome: 'completed',
  durationMs: 1200,
  windows: [
    {
      tenant: 'batch-summariser',
      budget: 'month-tokens',
      window: 'month',
      unit: 'tokens',
      limit: 40000,
      used: 1394,
      held: 0,
      enforce: true,
    },
  ],
};

describe('parseEvent', () => {
  it('accepts a valid event from JSON text and bytes', () => {
    expect(parseEvent(JSON.stringify(settled))).toMatchObject({ ok: true });
    expect(parseEvent(new TextEncoder().encode(JSON.stringify(settled)))).toMatchObject({
      ok: true,
    });
  });

  it('drops unknown keys after an event of the same shape held none, at every level', () => {
    const parsed = (e: object) => parseEvent(JSON.stringify(e));
    const window = { ...settled.windows[0]!, removed: true as const };
    const clean = { ...settled, reasoningTokens: 0, windows: [window] };
    const first = parsed(clean);
    if (!first.ok) throw new Error(first.error.message);
    const out = first.value;
    expect(out).toMatchObject(clean);
    // The clean event's keys in its order, one optional key renamed (top level and window).
    const { removed: _, ...kept } = window;
    const renamed = { ...settled, reasoningTokenz: 5, windows: [{ ...kept, removez: true }] };
    expect(parsed(renamed)).toEqual({ ok: true, value: { ...out, windows: [kept] } });
    const extra = { ...clean, extra: 1, windows: [window, { ...window, x: 1 }] };
    expect(parsed(extra)).toEqual({ ok: true, value: { ...out, windows: [window, window] } });
    expect(parsed(clean)).toEqual(first);
  });

  it('rejects malformed JSON, unknown types and future versions without throwing', () => {
    expect(parseEvent('{nope')).toEqual({
      ok: false,
      error: { code: 'invalid_json', message: 'event is not valid JSON' },
    });
    expect(parseEvent('[]')).toMatchObject({ ok: false });
    expect(
      parseEvent(JSON.stringify({ ...settled, type: 'reservation.teleported' })),
    ).toMatchObject({ ok: false });
    expect(parseEvent(JSON.stringify({ ...settled, schemaVersion: 2 }))).toEqual({
      ok: false,
      error: { code: 'unsupported_version', message: 'unsupported schemaVersion 2' },
    });
  });

  it('rejects negative amounts and a tenant that could break a subject', () => {
    expect(parseEvent(JSON.stringify({ ...settled, billedTokens: -1 }))).toMatchObject({
      ok: false,
    });
    expect(parseEvent(JSON.stringify({ ...settled, tenant: 'a.b' }))).toMatchObject({ ok: false });
  });
});

describe('TenantId', () => {
  it.each(['a.b', 'a b', 'a*', 'a>', 'ünï', 'A', '', '-a', 'x'.repeat(65)])('rejects %j', (id) => {
    expect(TenantId.safeParse(id).success).toBe(false);
  });
  it.each(['batch-summariser', 'a', 'team_1', 'x'.repeat(64)])('accepts %j', (id) => {
    expect(TenantId.safeParse(id).success).toBe(true);
  });
});

describe('fields added to v1 later', () => {
  it('read an event written before surfaces and token categories as chat with none', () => {
    const parsed = parseEvent(JSON.stringify(settled));
    expect(parsed).toMatchObject({
      ok: true,
      value: {
        api: 'chat',
        cacheWrite5mTokens: 0,
        cacheWrite1hTokens: 0,
        reasoningTokens: 0,
        audioPromptTokens: 0,
        audioCompletionTokens: 0,
      },
    });
  });

  it('keep the surface and the categories of a newer event, and refuse an unknown surface', () => {
    const messages = {
      ...settled,
      api: 'messages',
      cacheWrite5mTokens: 40,
      cacheWrite1hTokens: 2,
      reasoningTokens: 9,
      audioPromptTokens: 30,
      audioCompletionTokens: 4,
    };
    expect(parseEvent(JSON.stringify(messages))).toMatchObject({ ok: true, value: messages });
    expect(parseEvent(JSON.stringify({ ...settled, api: 'completions' }))).toMatchObject({
      ok: false,
    });
  });
});

describe('checkEvent (the authority publishes what it returns)', () => {
  it('leaves the fields with defaults out where the event does, as every reader fills them', () => {
    const wire = structuredClone(settled);
    expect(checkEvent(wire)).toStrictEqual(settled);
    const read = parseEvent(JSON.stringify(checkEvent(structuredClone(settled))));
    expect(read).toMatchObject({ ok: true, value: { api: 'chat', reasoningTokens: 0 } });
  });

  it('keeps them where the event has them, drops unknown keys and throws on an invalid one', () => {
    const full = { ...settled, api: 'responses', reasoningTokens: 0, serviceTier: 'flex' };
    expect(checkEvent({ ...full, extra: 1 })).toStrictEqual(full);
    expect(() => checkEvent({ ...settled, heldTokens: -1 })).toThrow();
  });
});

describe("a window's own charge (added to v1 later)", () => {
  const window = settled.windows[0]!;

  it("is absent on a window charged the event's own (and on every event from before it)", () => {
    const parsed = parseEvent(JSON.stringify(settled));
    expect(
      parsed.ok && parsed.value.type === 'reservation.settled' && parsed.value.windows,
    ).toEqual([window]);
    expect(windowCharge(settled, { unit: 'tokens' })).toBe(1394);
  });

  it('is kept where the event charged a window otherwise, and is what that window got', () => {
    const added = { ...window, budget: 'day-tokens', window: 'day', used: 1394, charged: 1500 };
    const event = { ...settled, chargedTokens: 1394 - 106, windows: [window, added] };
    const parsed = parseEvent(JSON.stringify(event));
    expect(parsed).toMatchObject({ ok: true, value: { windows: [window, added] } });
    expect(windowCharge(event, { unit: 'tokens', charged: 1500 })).toBe(1500);
    expect(windowCharge(event, { unit: 'tokens' })).toBe(1288);
    expect(
      parseEvent(JSON.stringify({ ...event, windows: [{ ...added, charged: 1.5 }] })),
    ).toMatchObject({
      ok: false,
    });
  });

  it("a window the plan no longer has is kept as `removed` (true only), charged the event's own", () => {
    const gone = { ...window, budget: 'day-tokens', window: 'day', limit: 0, enforce: false };
    const event = { ...settled, windows: [window, { ...gone, removed: true }] };
    expect(parseEvent(JSON.stringify(event))).toMatchObject({
      ok: true,
      value: { windows: [window, { ...gone, removed: true }] },
    });
    expect(windowCharge(event, { unit: 'tokens' })).toBe(1394);
    const flagged = { ...event, windows: [{ ...gone, removed: false }] };
    expect(parseEvent(JSON.stringify(flagged))).toMatchObject({ ok: false });
  });
});

describe('Usage', () => {
  it('defaults the categories an older settle does not send', () => {
    expect(Usage.parse({ promptTokens: 10, completionTokens: 5 })).toEqual({
      promptTokens: 10,
      completionTokens: 5,
      cachedPromptTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
      reasoningTokens: 0,
      audioPromptTokens: 0,
      audioCompletionTokens: 0,
    });
  });

  it('keeps cache parts within the prompt and reasoning within the output', () => {
    const ok = { promptTokens: 10, completionTokens: 5, cachedPromptTokens: 4 };
    expect(Usage.safeParse({ ...ok, cacheWrite5mTokens: 3, cacheWrite1hTokens: 3 }).success).toBe(
      true,
    );
    expect(Usage.safeParse({ ...ok, cacheWrite5mTokens: 3, cacheWrite1hTokens: 4 }).success).toBe(
      false,
    );
    expect(Usage.safeParse({ ...ok, reasoningTokens: 5 }).success).toBe(true);
    expect(Usage.safeParse({ ...ok, reasoningTokens: 6 }).success).toBe(false);
    expect(
      Usage.safeParse({ ...ok, audioPromptTokens: 10, audioCompletionTokens: 5 }).success,
    ).toBe(true);
    expect(Usage.safeParse({ ...ok, audioPromptTokens: 11 }).success).toBe(false);
    expect(Usage.safeParse({ ...ok, audioCompletionTokens: 6 }).success).toBe(false);
  });
});
