/**
 * The one way values and names enter SQL. ClickHouse 18.16 has no query parameters, so every
 * value is written as a literal by `lit()` and every identifier is checked by `ident()`; the
 * `sql` tag applies `lit()` to each interpolation unless it is already a `Sql` fragment.
 *
 * Audit notes (tested in sql.unit.test.ts, and round-tripped on 18.16 and current ClickHouse):
 * - String literals: `\` and `'` are backslash-escaped, every C0 control byte and DEL become
 *   `\xHH`, everything else (including any Unicode) is passed through as UTF-8. This is the
 *   escaping ClickHouse's own `quoteString` does, made stricter for control characters.
 * - A string that is not well-formed UTF-16 (a lone surrogate) is refused: it cannot round-trip.
 * - Numbers must be finite; integers beyond 2^53 must be bigints.
 * - Identifiers: `[A-Za-z_][A-Za-z0-9_]{0,127}`, written in backquotes.
 */

import { BaseError } from '@holdfast/runtime';

/** A piece of SQL that is already safe (built by `sql`, `ident` or `raw`). */
export class Sql {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

export type SqlValue = string | number | bigint | boolean | null | Sql | readonly SqlValue[];

export class SqlError extends BaseError<'invalid_sql'> {
  constructor(message: string) {
    super({ code: 'invalid_sql', message });
  }
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** True for a name `ident()` accepts. */
export function isIdentifier(name: string): boolean {
  return IDENT.test(name);
}

/** A validated identifier (database, table, column), backquoted. */
export function ident(name: string): Sql {
  if (!IDENT.test(name)) throw new SqlError(`invalid SQL identifier ${JSON.stringify(name)}`);
  return new Sql(`\`${name}\``);
}

/** `db`.`table`, both validated. */
export function qualified(database: string, table: string): Sql {
  return new Sql(`${ident(database).text}.${ident(table).text}`);
}

function quoteString(s: string): string {
  let out = "'";
  // for..of walks code points; a lone surrogate comes out alone and cannot become UTF-8.
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) {
      throw new SqlError('string is not well-formed Unicode (lone surrogate)');
    }
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}'`;
}

function isList(value: SqlValue): value is readonly SqlValue[] {
  return Array.isArray(value);
}

/** One value as a ClickHouse literal. Arrays become `[...]` (use `tuple()` for IN lists). */
export function lit(value: SqlValue): Sql {
  if (value instanceof Sql) return value;
  if (value === null) return new Sql('NULL');
  if (isList(value)) return new Sql(`[${value.map((v) => lit(v).text).join(', ')}]`);
  switch (typeof value) {
    case 'string':
      return new Sql(quoteString(value));
    case 'bigint':
      return new Sql(value.toString());
    case 'boolean':
      return new Sql(value ? '1' : '0');
    case 'number':
      if (!Number.isFinite(value)) throw new SqlError(`non-finite number ${value}`);
      if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
        throw new SqlError(`integer ${value} is beyond 2^53: pass a bigint`);
      }
      return new Sql(Object.is(value, -0) ? '0' : String(value));
    default:
      throw new SqlError(`unsupported SQL value of type ${typeof value}`);
  }
}

/** `(a, b, c)` for `x IN (...)`; an empty list is refused (it is a syntax error). */
export function tuple(values: readonly SqlValue[]): Sql {
  if (values.length === 0) throw new SqlError('empty IN list');
  return new Sql(`(${values.map((v) => lit(v).text).join(', ')})`);
}

/** SQL text written by us, not derived from input (a keyword list, an ORDER BY). */
export function raw(text: string): Sql {
  return new Sql(text);
}

/** Tagged template: every `${value}` goes through `lit()` (or is kept when it is `Sql`). */
export function sql(strings: TemplateStringsArray, ...values: SqlValue[]): Sql {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += lit(v).text + (strings[i + 1] ?? '');
  });
  return new Sql(out);
}
