import { randomUUID } from 'node:crypto';
import { HoldfastEvent, parseEvent } from '@holdfast/events';
import { EVENT_EXAMPLES } from '@holdfast/events/testing';
import { describe, expect, it } from 'vitest';
import { refusal, settledCall } from '../test/events.js';
import { EventRow, extra, rowProblem, toEventRow } from './rows.js';

describe('event rows', () => {
  it('maps a settled call to columns, with nothing left over', () => {
    const [created, settled] = settledCall({ prompt: 370, completion: 512, keyId: null });
    const row = EventRow.parse(toEventRow(settled, 42, Date.UTC(2026, 0, 1)));
    expect(row).toMatchObject({
      id: settled.id,
      type: 'reservation.settled',
      time_ms: Date.parse(settled.time),
      ts: Math.floor(Date.parse(settled.time) / 1000),
      key_id: '',
      billed_tokens: 882,
      charged_tokens: 882,
      stream_seq: 42,
      extra: '',
      w_level: ['batch-summariser'],
      w_used: [882],
    });
    expect(JSON.parse(toEventRow(created, 1).extra)).toEqual({ expiresAt: created.expiresAt });
  });

  it('maps the surface and every token category to their columns (migration 011)', () => {
    const [created, settled] = settledCall({
      api: 'messages',
      prompt: 1_000,
      completion: 300,
      parts: { cached: 200, cacheWrite5m: 300, cacheWrite1h: 100, reasoning: 120 },
    });
    expect(toEventRow(settled, 1)).toMatchObject({
      api: 'messages',
      prompt_tokens: 1_000,
      cached_prompt_tokens: 200,
      cache_write_5m_tokens: 300,
      cache_write_1h_tokens: 100,
      completion_tokens: 300,
      reasoning_tokens: 120,
      extra: '',
    });
    expect(toEventRow(created, 1)).toMatchObject({ api: 'messages', reasoning_tokens: 0 });
    expect(toEventRow(refusal(), 1).api).toBe('chat');
  });

  it('maps the audio parts of a usage to their columns, 0 for an event from before them (015)', () => {
    const [created, settled] = settledCall({
      prompt: 1_000,
      completion: 300,
      parts: { audioPrompt: 400, audioCompletion: 250 },
    });
    expect(toEventRow(settled, 1)).toMatchObject({
      audio_prompt_tokens: 400,
      audio_completion_tokens: 250,
      extra: '',
    });
    expect(toEventRow(created, 1)).toMatchObject({ audio_prompt_tokens: 0 });
    const { audioPromptTokens: _a, audioCompletionTokens: _c, ...old } = settled;
    const before = HoldfastEvent.parse(old);
    expect(toEventRow(before, 1)).toMatchObject({
      audio_prompt_tokens: 0,
      audio_completion_tokens: 0,
    });
  });

  it("keeps what each window was charged: its own charged, else the event's in its unit (019)", () => {
    const [, settled] = settledCall({ prompt: 370, completion: 512 });
    const [month] = settled.windows;
    const event = HoldfastEvent.parse({
      ...settled,
      chargedTokens: 50,
      chargedMicroUsd: 70,
      windows: [
        month,
        { ...month, budget: 'day-tokens', window: 'day', charged: 882 },
        { ...month, budget: 'month-usd', unit: 'usd', limit: 0, enforce: false, removed: true },
      ],
    });
    const row = toEventRow(event, 1);
    // The usd window is one the plan no longer has (021): flagged, its charge kept.
    expect(row).toMatchObject({ w_charged: [50, 882, 70], w_removed: [0, 0, 1], extra: '' });
    expect(EventRow.safeParse(row).success).toBe(true);
    expect(toEventRow(refusal(), 1).w_charged).toEqual([0]);
  });

  it('keeps fields without a column in extra (a refusal message)', () => {
    const r = refusal({ shadow: true, code: 'concurrency_limit' });
    const row = toEventRow(r, 1);
    expect(row).toMatchObject({ code: 'concurrency_limit', shadow: 1, needed_tokens: 1394 });
    expect(JSON.parse(row.extra)).toEqual({ message: r.message, retryAfterSeconds: 60, count: 1 });
  });

  it('refuses a row that does not fit its columns, with zod and with the hot-path check', () => {
    const row = toEventRow(settledCall()[1], 1);
    expect(rowProblem(row)).toBeUndefined();
    const { extra: _, ...missing } = row;
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ ...row, prompt_tokens: 2 ** 32 }, 'prompt_tokens'],
      [{ ...row, charged_tokens: 1.5 }, 'charged_tokens'],
      [{ ...row, tenant: 7 }, 'tenant'],
      [{ ...row, w_used: [1, '2'] }, 'w_used'],
      [{ ...row, shadow: 2 }, 'shadow'],
      [{ ...row, surprise: 1 }, 'columns do not match events_raw_v1'],
      [missing, 'columns do not match events_raw_v1'],
    ];
    for (const [r, problem] of bad) {
      expect(EventRow.safeParse(r).success).toBe(false);
      expect(rowProblem(r)).toBe(problem);
    }
  });
});

describe('event rows for types without a call', () => {
  it('keeps an extended hold and a threshold crossing whole (columns + extra)', () => {
    const [created] = settledCall();
    const base = { schemaVersion: 1, time: new Date().toISOString(), tenant: 't', org: 't' };
    const extended = HoldfastEvent.parse({
      ...base,
      id: randomUUID(),
      type: 'reservation.extended',
      reservationId: created.reservationId,
      keyId: null,
      useCase: 'uc',
      model: 'm',
      mode: 'adaptive',
      heldTokens: 900,
      heldMicroUsd: 90,
      addedTokens: 300,
      addedMicroUsd: 30,
      coveredOutputTokens: 800,
      windows: [],
    });
    const crossed = HoldfastEvent.parse({
      ...base,
      id: randomUUID(),
      type: 'threshold.crossed',
      level: 't',
      budget: 'month-tokens',
      window: 'month',
      unit: 'tokens',
      threshold: 0.8,
      utilisation: 0.81,
      limit: 1000,
      used: 810,
      held: 0,
      causeEventId: created.id,
      windows: [],
    });
    for (const [event, rest] of [
      [extended, { addedTokens: 300, addedMicroUsd: 30, coveredOutputTokens: 800 }],
      [
        crossed,
        {
          window: 'month',
          unit: 'tokens',
          threshold: 0.8,
          utilisation: 0.81,
          limit: 1000,
          used: 810,
          held: 0,
          causeEventId: created.id,
        },
      ],
    ] as const) {
      const row = toEventRow(event, 1);
      expect(rowProblem(row)).toBeUndefined();
      expect(JSON.parse(row.extra)).toEqual(rest);
    }
    expect(toEventRow(extended, 1)).toMatchObject({ held_tokens: 900, charged_tokens: 0 });
    expect(toEventRow(crossed, 1)).toMatchObject({ budget: 'month-tokens', level: 't' });
  });

  it('keeps in extra every field of every event type that has no column, and nothing else', () => {
    // What every column maps, whatever the type (`windows`: the w_* arrays).
    const row = toEventRow(EVENT_EXAMPLES['reservation.settled'] as HoldfastEvent, 1);
    const mapped = new Set(['time', 'schemaVersion', 'durationMs', 'leaseMs', 'windows']);
    const camel = (c: string) => c.replace(/_([a-z0-9])/g, (_, x: string) => x.toUpperCase());
    for (const column of Object.keys(row)) mapped.add(camel(column));
    for (const [type, example] of Object.entries(EVENT_EXAMPLES)) {
      // An unknown field too: the parse removes it, so it is not kept either.
      const parsed = parseEvent(JSON.stringify({ ...example, notInTheSchema: 1 }));
      if (!parsed.ok) throw new Error(`${type}: ${parsed.error.message}`);
      const e = parsed.value;
      const want = Object.fromEntries(Object.entries(e).filter(([k]) => !mapped.has(k)));
      const got = extra(e);
      expect(got === '' ? {} : JSON.parse(got), type).toEqual(want);
      if (Object.keys(want).length === 0) expect(got, type).toBe('');
    }
  });
});
