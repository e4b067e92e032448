/**
 * Tool-call arguments as a Python server reads and prints them. vLLM parses each call's
 * `arguments` string with `json.loads` before the chat template prints it (`| tojson`, that is
 * `json.dumps`), and Python's numbers print otherwise than JavaScript's: an integer keeps every
 * digit (JSON.parse made a 400-digit one Infinity, printed `null`), a float keeps its `.0`
 * (`1.0`, `1e15` is `1000000000000000.0`) and Python's exponent form (`1e-05`), and an overflow
 * is `Infinity`. So each number of the arguments goes to the template as a marker string, and
 * the rendered prompt gets Python's text in its place (`pythonNumbers`).
 */

/** A marker: U+FDD2, the number's index, U+FDD3 (noncharacters: no real text has them). */
const OPEN = '\uFDD2';
const CLOSE = '\uFDD3';
/** Where markers stand in a rendered prompt: quoted (`tojson`, raw or ASCII-escaped) or bare. */
const MARKED = /"\uFDD2(\d+)\uFDD3"|"\\ufdd2(\d+)\\ufdd3"|\uFDD2(\d+)\uFDD3/gi;
/** A JSON string (skipped) or a JSON number (captured), in JSON text. */
const TOKEN = /"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

/** A number as Python prints it: `json.dumps` (in `tojson`) and `str` (printed bare). */
export interface PythonNumber {
  json: string;
  str: string;
}

/**
 * The value Python parses from `text` with each number a marker (its printing pushed on
 * `numbers`), or the text itself when it is not JSON (as parseJsonOrSelf).
 */
export function parseWithPythonNumbers(text: string, numbers: PythonNumber[]): unknown {
  try {
    JSON.parse(text);
  } catch {
    return text;
  }
  const marked = text.replace(TOKEN, (token, number: string | undefined) => {
    if (number === undefined) return token;
    return JSON.stringify(`${OPEN}${numbers.push(pythonNumber(number)) - 1}${CLOSE}`);
  });
  return JSON.parse(marked) as unknown;
}

/**
 * A value of the request as the server parses it from the body the edge forwards (numbers as
 * JavaScript prints them, JSON.stringify), with each number a marker: `1e-7` reaches Python as
 * that text and prints as `1e-07`. A number JSON cannot carry (Infinity) is left: it goes as
 * `null`, as JavaScript renders it.
 */
export function markNumbers(value: unknown, numbers: PythonNumber[]): unknown {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return value;
    return `${OPEN}${numbers.push(pythonNumber(JSON.stringify(value))) - 1}${CLOSE}`;
  }
  if (Array.isArray(value)) return value.map((item) => markNumbers(item, numbers));
  if (typeof value === 'object' && value !== null) {
    // fromEntries: own keys whatever their name (`__proto__` too).
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, markNumbers(item, numbers)]),
    );
  }
  return value;
}

/** Whether a text has marker characters of its own (a request carrying them is not marked). */
export function hasMarkers(text: string): boolean {
  return text.includes(OPEN) || text.includes(CLOSE);
}

/** The rendered prompt with each marker replaced by the number as Python prints it there. */
export function pythonNumbers(rendered: string, numbers: readonly PythonNumber[]): string {
  if (numbers.length === 0) return rendered;
  return rendered.replace(MARKED, (m, q?: string, e?: string, bare?: string) => {
    const n = numbers[Number(q ?? e ?? bare)];
    if (!n) return m;
    return bare === undefined ? n.json : n.str;
  });
}

/** How Python prints the number JSON text `source` parses to. */
export function pythonNumber(source: string): PythonNumber {
  if (/^-?\d+$/.test(source)) {
    const digits = /^-?0+$/.test(source) ? '0' : source;
    return { json: digits, str: digits };
  }
  const value = Number(source);
  if (!Number.isFinite(value)) {
    const sign = value < 0 ? '-' : '';
    return { json: `${sign}Infinity`, str: `${sign}inf` };
  }
  const repr = floatRepr(value);
  return { json: repr, str: repr };
}

/**
 * Python's `repr` of a float: the shortest digits that round-trip (as JavaScript's), in fixed
 * notation with at least one decimal when the exponent is in [-4, 16), else `d.ddde+XX`.
 */
function floatRepr(value: number): string {
  const sign = value < 0 || Object.is(value, -0) ? '-' : '';
  const [mantissa, exp] = Math.abs(value).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const e = Number(exp);
  if (e >= -4 && e < 16) {
    if (e < 0) return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
    const whole = digits.slice(0, e + 1).padEnd(e + 1, '0');
    const fraction = digits.slice(e + 1);
    return `${sign}${whole}.${fraction === '' ? '0' : fraction}`;
  }
  const shown = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const abs = String(Math.abs(e)).padStart(2, '0');
  return `${sign}${shown}e${e < 0 ? '-' : '+'}${abs}`;
}
