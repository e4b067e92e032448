import { randomUUID } from 'node:crypto';
import { checkEvent, HoldfastEvent } from '@holdfast/events';
import { expect, test } from 'vitest';
import type { z } from 'zod';
import { decodeFields, decodeLoop, outboxFlat } from '../src/outbox.js';

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;
const chance = (p: number) => Math.random() < p;

const WINDOWS = [
  '',
  'bench-team,month-tokens,100000000,52345,1200,1',
  'bench-team,month-tokens,100000000,52345,1200,1;bench-org,day-usd,5000,12,40,0,c,7;bench-team,minute-tokens,9,1,0,1,k,key_1,r',
  'bench-team,month-tokens,1,2,3,1,u,user@x',
];
const STRINGS = [
  'UC-101',
  'not_forwarded',
  'completed',
  'month',
  'tokens',
  'upstream_capacity',
  'x',
];
const BAD = ['', '-1', 'x', '1e3', '1.5', '9007199254740993', 'é"\\\n\u0001', 'null'];

/** A value as the scripts write the field, or (sometimes) one no event schema accepts. */
function value(name: string, field: z.ZodType | undefined): string {
  if (chance(0.01)) return pick(BAD);
  if (name === 'time' || name === 'expiresAt' || name.endsWith('At')) {
    return String(Date.now() - Math.floor(Math.random() * 1e9));
  }
  if (name === 'windows') return pick(WINDOWS);
  if (name === 'id' || name === 'reservationId') return randomUUID();
  if (name === 'tenant' || name === 'org' || name === 'level') return 'bench-team';
  if (name === 'model') return 'gpt-4o-mini';
  if (name === 'mode') return pick(['reserve', 'estimate', 'meter']);
  if (name === 'api') return pick(['chat', 'responses']);
  if (name === 'outcome') return 'completed';
  if (name === 'code') return pick(['budget_exceeded', 'concurrency_limit']);
  if (name === 'budget') return pick(['month-tokens', '']);
  if (name === 'scope') return pick(['key', 'end_user']);
  if (name === 'keyId') return pick(['key_1', '']);
  if (name === 'endUser') return 'user@x';
  if (name === 'serviceTier') return 'default';
  if (name === 'onExpiry') return 'bill';
  if (name === 'toolPrices') return 'web_search:10000,code:3';
  if (name === 'longContext' || name === 'shadow' || name === 'fromAnswered') {
    return pick(['1', '0']);
  }
  if (name === 'retryAfterSeconds') return pick(['-1', '3']);
  if (field?.safeParse(1394).success) return pick(['0', '1', '1394', '812']);
  // A text field: the first of these its schema takes.
  return STRINGS.find((v) => field?.safeParse(v).success) ?? 'UC-101';
}

const TYPES = HoldfastEvent.options.map((s) => ({
  type: String(s.shape.type.value),
  fields: s.shape,
  names: Object.keys(s.shape).filter((n) => n !== 'type' && n !== 'schemaVersion'),
}));
const ODD_NAMES = ['extra', 'inFlight', '__proto__', 'constructor', '1', 'a-b', 'schemaVersion'];

/** Field names of an entry: `type` first (or not), the type's own in some order, odd ones. */
interface Shape {
  type: string;
  names: string[];
  fields?: Record<string, z.ZodType>;
}

function shape(): Shape {
  const t = pick(TYPES);
  // Half as the schemas name them (the scripts write each type's fields in one order).
  if (chance(0.5)) return { ...t, names: ['type', ...t.names] };
  const names = t.names.filter(() => !chance(0.1));
  if (chance(0.3)) names.sort(() => Math.random() - 0.5);
  if (chance(0.1)) names.splice(Math.floor(Math.random() * names.length), 0, pick(ODD_NAMES));
  if (chance(0.05)) names.push(pick(names));
  const type = chance(0.03) ? 'reservation.teleported' : t.type;
  if (chance(0.05)) names.splice(Math.floor(Math.random() * names.length), 0, 'type');
  else names.unshift('type');
  return { type, names, fields: t.fields };
}

function entry({ type, names, fields }: Shape): string[] {
  const flat = names.flatMap((n) => [
    n,
    n === 'type' ? type : value(n, fields && Object.hasOwn(fields, n) ? fields[n] : undefined),
  ]);
  if (chance(0.02)) flat.pop();
  return flat;
}

function decoded(f: () => Record<string, unknown>): Record<string, unknown> | string {
  try {
    return f();
  } catch (err) {
    return `throws ${String(err)}`;
  }
}

/** checkEvent's verdict: the event's JSON, or its error. */
function verdict(raw: Record<string, unknown>): string {
  try {
    return JSON.stringify(checkEvent(raw));
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}

test('an entry decoded by its compiled shape is the keyed-store loop, key for key and byte for byte, checked or not', () => {
  // A pool larger than the shapes compiled per type, each drawn many times with new values.
  const shapes = Array.from({ length: 300 }, shape);
  const entries: string[][] = [];
  for (let i = 0; i < 10_000; i++) entries.push(entry(pick(shapes)));
  // The scripts' own layouts (close.lua's settled, admit's created), one field `e` joined by NUL.
  for (const t of ['reservation.created', 'reservation.settled']) {
    const { names, fields } = TYPES.find((x) => x.type === t)!;
    for (let i = 0; i < 200; i++) {
      entries.push(['e', entry({ type: t, names: ['type', ...names], fields }).join('\0')]);
    }
  }
  let valid = 0;
  for (const fields of entries) {
    const flat = outboxFlat(fields);
    const label = flat.join('|');
    // An entry neither reads (a time out of range) throws the same error from both.
    const now = decoded(() => decodeFields(flat));
    const before = decoded(() => decodeLoop(flat));
    if (typeof now === 'string' || typeof before === 'string') {
      expect(now, label).toBe(before);
      continue;
    }
    expect(now, label).toStrictEqual(before);
    expect(Object.keys(now), label).toEqual(Object.keys(before));
    expect(JSON.stringify(now), label).toBe(JSON.stringify(before));
    const checked = verdict(now);
    expect(checked, label).toBe(verdict(before));
    if (!checked.startsWith('error')) valid++;
  }
  // Both paths were held on events that pass the check, not only on entries that fail it.
  expect(valid).toBeGreaterThan(1_000);
});
