import { parseEvent, type HoldfastEvent } from '@holdfast/events';
import { EVENT_EXAMPLES, EXAMPLE_WINDOW, ODD_VALUES } from '@holdfast/events/testing';
import { describe, expect, it } from 'vitest';
import { encodeEventRow } from './event-row.js';
import { RowBinaryEncoder } from './rowbinary.js';
import { rowProblem, toEventRow, writeEventRow } from './rows.js';

/**
 * `encodeEventRow` writes a row straight from the event. This holds it to the path it replaced
 * (`toEventRow`, then `rowProblem`, then `writeEventRow`): the same bytes for every row that
 * fits, the same column named for every row that does not, over every event type with each
 * field and each window field set in turn to odd and hostile values.
 */

const NOW = Date.UTC(2026, 11, 7, 10, 30);

/** Values past the columns' types (UInt32, the safe integers, a DateTime, a String's cap). */
const HOSTILE: unknown[] = [
  ...ODD_VALUES,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 53 - 1,
  -(2 ** 53 - 1),
  'x'.repeat(1_000_001),
  '2106-02-07T06:28:15.000Z',
  '2106-02-07T06:28:16.000Z',
  '2200-01-01T00:00:00.000Z',
  '1960-01-01T00:00:00.000Z',
  'Zoë',
  '團隊',
];

/** The examples, and the call events again with every optional field that has a column. */
function seeds(): Record<string, unknown>[] {
  const examples: Record<string, unknown>[] = Object.values(EVENT_EXAMPLES);
  const full = {
    endUser: 'user-7',
    upstream: 'backup',
    serviceTier: 'priority',
    longContext: true,
    windows: [
      EXAMPLE_WINDOW,
      { ...EXAMPLE_WINDOW, scope: 'key', subject: 'batch-1', charged: -5 },
      { ...EXAMPLE_WINDOW, scope: 'end_user', subject: 'user-7', removed: true, enforce: false },
    ],
  };
  return [
    ...examples,
    { ...EVENT_EXAMPLES['reservation.created'], ...full },
    {
      ...EVENT_EXAMPLES['reservation.settled'],
      ...full,
      audioPromptTokens: 12,
      audioCompletionTokens: 34,
      toolUses: 2,
      toolFeeMicroUsd: 20_000,
    },
    { ...EVENT_EXAMPLES['admission.refused'], shadow: true, level: 'acme' },
  ];
}

/** Every seed, each field of it and of its first window set in turn to each hostile value. */
function* inputs(): Generator<Record<string, unknown>> {
  for (const seed of seeds()) {
    yield seed;
    for (const key of Object.keys(seed)) {
      for (const v of HOSTILE) yield { ...seed, [key]: v };
    }
    const windows = seed.windows as Record<string, unknown>[] | undefined;
    if (!windows?.length) continue;
    for (const key of Object.keys(windows[0]!)) {
      for (const v of HOSTILE) yield { ...seed, windows: [{ ...windows[0], [key]: v }] };
    }
  }
}

describe('encodeEventRow', () => {
  it('writes the bytes of toEventRow + writeEventRow, and refuses at rowProblem column', () => {
    const oracle = new RowBinaryEncoder();
    const encoder = new RowBinaryEncoder();
    const written: Array<[Buffer, Buffer]> = [];
    let refused = 0;
    let seq = 0;
    for (const input of inputs()) {
      const parsed = parseEvent(JSON.stringify(input));
      if (!parsed.ok) continue;
      const e: HoldfastEvent = parsed.value;
      // A sequence past the safe integers now and then: stream_seq does not fit.
      const streamSeq = ++seq % 997 === 0 ? 2 ** 53 : seq;
      const row = toEventRow(e, streamSeq, NOW);
      const problem = rowProblem(row);
      const got = encodeEventRow(encoder, e, Date.parse(e.time), streamSeq, NOW);
      if (problem !== undefined) {
        expect(got, JSON.stringify(input).slice(0, 300)).toBe(problem);
        refused++;
        continue;
      }
      const want = writeEventRow(oracle, row);
      expect(Buffer.isBuffer(got) && got.equals(want), JSON.stringify(input).slice(0, 300)).toBe(
        true,
      );
      written.push([got as Buffer, want]);
    }
    // A refused row left nothing behind: every row written before or after it is intact.
    for (const [got, want] of written) expect(got.equals(want)).toBe(true);
    expect(written.length).toBeGreaterThan(1_000);
    expect(refused).toBeGreaterThan(50);
    // Thousands of parses, zod's message for each refused one, two encoders: 34-61 s on the
    // shared box at load average 20-25, past the unit tests' 30 s.
  }, 180_000);

  it('writes the same row for an event published without the fields at their defaults', () => {
    // What the authority leaves out (issue 14), at the value each reader fills in its place.
    const atDefault: Record<string, unknown> = {
      api: 'chat',
      serviceTier: 'default',
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
      reasoningTokens: 0,
      audioPromptTokens: 0,
      audioCompletionTokens: 0,
    };
    const encoder = new RowBinaryEncoder();
    const row = (input: Record<string, unknown>) => {
      const parsed = parseEvent(JSON.stringify(input));
      if (!parsed.ok) throw new Error(parsed.error.message);
      const got = encodeEventRow(encoder, parsed.value, Date.parse(parsed.value.time), 1, NOW);
      if (!Buffer.isBuffer(got)) throw new Error(`refused at ${got}`);
      return Buffer.from(got);
    };
    let compared = 0;
    for (const seed of seeds()) {
      const type = String(seed.type);
      // The fields each type has: all on a settle, api and serviceTier on a created, api on
      // every other call event and refusal (a moved or retried event has none of them).
      const keys =
        type === 'reservation.settled'
          ? Object.keys(atDefault)
          : type === 'reservation.created'
            ? ['api', 'serviceTier']
            : ['api'];
      if (/^reservation\.(moved|retried)$/.test(type) || !/^(reservation|admission)\./.test(type))
        continue;
      const full = { ...seed };
      const wire = { ...seed };
      for (const key of keys) {
        full[key] = atDefault[key];
        delete wire[key];
      }
      expect(row(wire).equals(row(full)), type).toBe(true);
      compared++;
    }
    expect(compared).toBeGreaterThan(8);
  });

  it('moves a row begun at the end of a slab whole, and drops a refused one there too', () => {
    const e = parseEvent(JSON.stringify(EVENT_EXAMPLES['reservation.settled']));
    const huge = parseEvent(
      JSON.stringify({ ...EVENT_EXAMPLES['reservation.created'], promptTokens: 2 ** 32 }),
    );
    if (!e.ok || !huge.ok) throw new Error('examples must parse');
    const oracle = new RowBinaryEncoder();
    const encoder = new RowBinaryEncoder();
    const time = Date.parse(e.value.time);
    const rows: Array<Buffer | string> = [];
    // ~4,000 rows of ~400 bytes: past one 1 MiB slab, with a refusal every 7th row.
    for (let i = 0; i < 4_000; i++) {
      rows.push(encodeEventRow(encoder, i % 7 ? e.value : huge.value, time, i, NOW));
    }
    rows.forEach((got, i) => {
      if (i % 7 === 0) expect(got).toBe('prompt_tokens');
      else
        expect((got as Buffer).equals(writeEventRow(oracle, toEventRow(e.value, i, NOW)))).toBe(
          true,
        );
    });
  });
});
