/**
 * JSON as a Python server reads and prints it, written apart from the edge's tokenizer so the
 * mock is a second opinion: `json.loads` keeps an integer's every digit and a float as a float
 * (`1.0` stays a float, `1e-7` is 1e-07), and transformers' `tojson` filter is `json.dumps`
 * with its defaults but `ensure_ascii=False` (`", "` and `": "` separators, non-ASCII as is).
 */

/** A parsed JSON value; numbers keep their source text (Python's int or float). */
export type PyValue =
  null | boolean | string | { int: string } | { float: number } | PyValue[] | Map<string, PyValue>;

/** `json.loads(text)`; throws on text that is not JSON (as Python raises). */
export function loads(text: string): PyValue {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (): never => {
    throw new SyntaxError(`not JSON at ${i}`);
  };
  const value = (): PyValue => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const out = new Map<string, PyValue>();
      ws();
      if (text[i] === '}') return (i++, out);
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        const key = string();
        ws();
        if (text[i++] !== ':') fail();
        out.set(key, value());
        ws();
        const next = text[i++];
        if (next === '}') return out;
        if (next !== ',') fail();
      }
    }
    if (c === '[') {
      i++;
      const out: PyValue[] = [];
      ws();
      if (text[i] === ']') return (i++, out);
      for (;;) {
        out.push(value());
        ws();
        const next = text[i++];
        if (next === ']') return out;
        if (next !== ',') fail();
      }
    }
    if (c === '"') return string();
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (text.startsWith(word, i)) return ((i += word.length), v);
    }
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) return fail();
    i += m[0].length;
    return m[1] === undefined && m[2] === undefined ? { int: m[0] } : { float: Number(m[0]) };
  };
  const string = (): string => {
    // JSON.parse refuses what JSON strings may not hold (control characters, bad escapes).
    const m = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i));
    if (!m) return fail();
    i += m[0].length;
    return JSON.parse(m[0]) as string;
  };
  const out = value();
  ws();
  if (i !== text.length) fail();
  return out;
}

/** A JavaScript value (a parsed request body) as Python would have read it from its JSON. */
export function fromJs(value: unknown): PyValue {
  return loads(JSON.stringify(value) ?? 'null');
}

/** `json.dumps(value, ensure_ascii=False)`. */
export function dumps(value: PyValue): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return quote(value);
  if (Array.isArray(value)) return `[${value.map(dumps).join(', ')}]`;
  if (value instanceof Map) {
    return `{${[...value].map(([k, v]) => `${quote(k)}: ${dumps(v)}`).join(', ')}}`;
  }
  if ('int' in value) return value.int.replace(/^-0$/, '0');
  return floatRepr(value.float);
}

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

function quote(s: string): string {
  let out = '"';
  for (const c of s) {
    const code = c.charCodeAt(0);
    out += ESCAPES[c] ?? (code < 0x20 ? `\\u${code.toString(16).padStart(4, '0')}` : c);
  }
  return `${out}"`;
}

/**
 * Python's float repr: JavaScript's shortest round-trip digits (the same digits), laid out as
 * CPython's `float_repr_style = 'short'` lays them: exponent form below 1e-4 or from 1e16, with
 * a two-digit exponent at least; else positional with a `.0` when whole. Overflow: Infinity.
 */
function floatRepr(x: number): string {
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : x < 0 ? '-Infinity' : 'NaN';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const m = /^(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(Math.abs(x).toExponential())!;
  const digits = m[1]! + (m[2] ?? '');
  const exp = Number(m[3]);
  if (exp < -4 || exp >= 16) {
    const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp) < 10 ? `0${Math.abs(exp)}` : String(Math.abs(exp));
    return `${sign}${mantissa}e${exp < 0 ? '-' : '+'}${e}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  const point = exp + 1;
  const whole =
    digits.length > point ? digits.slice(0, point) : digits + '0'.repeat(point - digits.length);
  const frac = digits.length > point ? digits.slice(point) : '0';
  return `${sign}${whole}.${frac}`;
}
