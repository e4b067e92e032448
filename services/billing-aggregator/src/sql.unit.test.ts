import { describe, expect, it } from 'vitest';
import { HOSTILE_STRINGS } from '../test/schema-contract.js';
import { ident, lit, qualified, sql, SqlError, tuple } from './sql.js';

describe('lit: string literals', () => {
  it.each([
    ["it's", "'it\\'s'"],
    ["'; DROP TABLE t; --", "'\\'; DROP TABLE t; --'"],
    ['a\\b', "'a\\\\b'"],
    ["\\'", "'\\\\\\''"],
    ['nul\u0000', "'nul\\x00'"],
    ['a\nb\r\tc', "'a\\x0ab\\x0d\\x09c'"],
    ['\u007f', "'\\x7f'"],
    ['ünï 日本 🧾', "'ünï 日本 🧾'"],
    ['', "''"],
  ])('%j -> %s', (input, out) => {
    expect(lit(input).text).toBe(out);
  });

  it('never leaves an unescaped quote, backslash or control byte in any hostile string', () => {
    for (const s of HOSTILE_STRINGS) {
      const body = lit(s).text.slice(1, -1);
      // Remove escape pairs; what is left must hold no quote, backslash or control char.
      const rest = body.replace(/\\x[0-9a-f]{2}|\\\\|\\'/g, '');
      expect([...rest].filter((c) => c === "'" || c === '\\' || c < ' ' || c === '\u007f')).toEqual(
        [],
      );
    }
  });

  it('refuses a lone surrogate, which cannot become UTF-8', () => {
    expect(() => lit('bad \ud800 string')).toThrow(SqlError);
    expect(() => lit('\udc00')).toThrow(SqlError);
  });
});

describe('lit: other values', () => {
  it('writes numbers, bigints, booleans, null and arrays', () => {
    expect(lit(42).text).toBe('42');
    expect(lit(-1.5).text).toBe('-1.5');
    expect(lit(-0).text).toBe('0');
    expect(lit(2n ** 63n).text).toBe('9223372036854775808');
    expect(lit(true).text).toBe('1');
    expect(lit(null).text).toBe('NULL');
    expect(lit(['a', 1, ["b'"]]).text).toBe("['a', 1, ['b\\'']]");
  });

  it.each([NaN, Infinity, -Infinity, 2 ** 53 + 2])('refuses %s', (n) => {
    expect(() => lit(n)).toThrow(SqlError);
  });

  it('refuses values of other types', () => {
    expect(() => lit({} as never)).toThrow(SqlError);
    expect(() => lit(undefined as never)).toThrow(SqlError);
  });
});

describe('ident', () => {
  it.each(['holdfast', 'hf_t3f9a0c12', '_x', 'A1'])('accepts %s', (name) => {
    expect(ident(name).text).toBe(`\`${name}\``);
  });
  it.each(['', '1abc', 'a-b', 'a.b', 'a`b', 'a b', "a'", 'x; DROP', 'ü', 'a'.repeat(129)])(
    'refuses %j',
    (name) => {
      expect(() => ident(name)).toThrow(SqlError);
    },
  );
  it('qualifies db.table', () => {
    expect(qualified('holdfast', 'events_raw_v1').text).toBe('`holdfast`.`events_raw_v1`');
  });
});

describe('sql tag', () => {
  it('quotes every interpolation and keeps fragments', () => {
    const tenant = "x' OR 1=1 --";
    const q = sql`SELECT * FROM ${qualified('db', 't')} WHERE tenant = ${tenant} AND n IN ${tuple([1, 2])}`;
    expect(q.text).toBe("SELECT * FROM `db`.`t` WHERE tenant = 'x\\' OR 1=1 --' AND n IN (1, 2)");
  });
  it('refuses an empty IN list', () => {
    expect(() => tuple([])).toThrow(SqlError);
  });
});
