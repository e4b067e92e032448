import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compileRowWriter, RowBinaryEncoder } from './rowbinary.js';
import { EVENTS_RAW_COLUMNS, EventRow } from './rows.js';

describe('RowBinary encoder', () => {
  it('writes each column type as ClickHouse reads it', () => {
    const write = compileRowWriter<Record<string, unknown>>([
      ['s', 'String'],
      ['u8', 'UInt8'],
      ['u32', 'UInt32'],
      ['u64', 'UInt64'],
      ['i64', 'Int64'],
      ['t', "DateTime('UTC')"],
      ['as', 'Array(String)'],
      ['ai', 'Array(Int64)'],
      ['ab', 'Array(UInt8)'],
    ]);
    const bytes = write(new RowBinaryEncoder(), {
      s: 'é',
      u8: 1,
      u32: 0x01020304,
      u64: 2 ** 32 + 5,
      i64: -2,
      t: 7,
      as: ['a', ''],
      ai: [1],
      ab: [],
    });
    expect([...bytes]).toEqual([
      ...[2, 0xc3, 0xa9],
      1,
      ...[4, 3, 2, 1],
      ...[5, 0, 0, 0, 1, 0, 0, 0],
      ...[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
      ...[7, 0, 0, 0],
      ...[2, 1, 0x61, 0],
      ...[1, 1, 0, 0, 0, 0, 0, 0, 0],
      0,
    ]);
  });

  it('writes UInt32 and (U)Int64 as Buffer writes them, at the edges of their ranges', () => {
    const write = compileRowWriter<{ u: number; i: number }>([
      ['u', 'UInt32'],
      ['i', 'Int64'],
    ]);
    const encoder = new RowBinaryEncoder();
    const u32s = [0, 1, 0x7f, 0x80, 0xff, 0x100, 0x7fffffff, 0x80000000, 2 ** 32 - 1];
    const i64s = [0, 1, -1, -2, 2 ** 31, -(2 ** 31), 2 ** 32, -(2 ** 32), 2 ** 32 + 5];
    i64s.push(2 ** 53 - 1, -(2 ** 53 - 1), 0x0123456789abcd, -0x0123456789abcd);
    for (const u of u32s) {
      for (const i of i64s) {
        const want = Buffer.alloc(12);
        want.writeUInt32LE(u, 0);
        want.writeBigInt64LE(BigInt(i), 4);
        expect([...write(encoder, { u, i })], `${u}, ${i}`).toEqual([...want]);
      }
    }
  });

  it('writes string lengths as LEB128 and moves a row that outgrows its slab', () => {
    const write = compileRowWriter<{ s: string }>([['s', 'String']]);
    const encoder = new RowBinaryEncoder();
    const long = 'x'.repeat(300);
    expect([...write(encoder, { s: long }).subarray(0, 2)]).toEqual([0xac, 0x02]);
    // Rows of 600 KB: the second does not fit the first 1 MB slab and starts a new one.
    const big = 'y'.repeat(600_000);
    const rows = [write(encoder, { s: big }), write(encoder, { s: big })];
    for (const r of rows) {
      expect(r.length).toBe(600_003);
      expect(r.subarray(3).toString()).toBe(big);
    }
  });

  it('refuses a column name that is not an identifier (names become code)', () => {
    expect(() => compileRowWriter([['a; process.exit()', 'String']])).toThrow(/column name/);
  });

  it('has the columns of EventRow and of migrations 001, 011, 013, 015, 016, 017, 018, 019 and 021, with their types, in order', () => {
    expect(EVENTS_RAW_COLUMNS.map(([c]) => c)).toEqual(Object.keys(EventRow.shape));
    const ddl = readFileSync(
      new URL('../migrations/001_create_events_raw_v1.sql', import.meta.url),
      'utf8',
    );
    const create = ddl.slice(ddl.indexOf('CREATE TABLE'));
    const body = create.slice(create.indexOf('(') + 1, create.indexOf('\n)'));
    const columns = body
      .split('\n')
      .map((l) => l.trim().replace(/,$/, ''))
      .filter((l) => l && !l.startsWith('--'))
      .map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)]);
    const added = [
      '011_alter_events_raw_v1.sql',
      '013_add_end_user_and_upstream_to_events_raw_v1.sql',
      '015_add_audio_tokens_to_events_raw_v1.sql',
      '016_add_service_tier_to_events_raw_v1.sql',
      '017_add_long_context_to_events_raw_v1.sql',
      '018_add_tool_fees_to_events_raw_v1.sql',
      '019_add_window_charges_to_events_raw_v1.sql',
      '021_add_window_removed_to_events_raw_v1.sql',
    ].flatMap((file) =>
      [
        ...readFileSync(new URL(`../migrations/${file}`, import.meta.url), 'utf8').matchAll(
          /ADD COLUMN (\w+) (.+);/g,
        ),
      ].map((m) => [m[1], m[2]!.replace(/ DEFAULT .*$/, '')]),
    );
    expect([...columns, ...added]).toEqual(EVENTS_RAW_COLUMNS.map(([c, t]) => [c, t]));
  });
});
