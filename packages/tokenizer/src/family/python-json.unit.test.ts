import { describe, expect, it } from 'vitest';
import {
  parseWithPythonNumbers,
  pythonNumber,
  pythonNumbers,
  type PythonNumber,
} from './python-json.js';

/** [JSON number, Python's json.dumps(json.loads(x)), str(json.loads(x))], printed by Python 3.11. */
const PYTHON: Array<[string, string, string]> = [
  ['0', '0', '0'],
  ['-0', '0', '0'],
  ['7', '7', '7'],
  ['-12', '-12', '-12'],
  ['1.0', '1.0', '1.0'],
  ['2.50', '2.5', '2.5'],
  ['-0.0', '-0.0', '-0.0'],
  ['0.0', '0.0', '0.0'],
  ['1e15', '1000000000000000.0', '1000000000000000.0'],
  ['1e16', '1e+16', '1e+16'],
  ['1E5', '100000.0', '100000.0'],
  ['1e-5', '1e-05', '1e-05'],
  ['0.0001', '0.0001', '0.0001'],
  ['0.00012', '0.00012', '0.00012'],
  ['1.5e-7', '1.5e-07', '1.5e-07'],
  ['123.456e2', '12345.6', '12345.6'],
  ['1e400', 'Infinity', 'inf'],
  ['-1e400', '-Infinity', '-inf'],
  ['1e-400', '0.0', '0.0'],
  ['-1e-400', '-0.0', '-0.0'],
  ['0.1', '0.1', '0.1'],
  ['1.7976931348623157e308', '1.7976931348623157e+308', '1.7976931348623157e+308'],
  ['5e-324', '5e-324', '5e-324'],
  ['123456789.123456789', '123456789.12345679', '123456789.12345679'],
  ['9007199254740993', '9007199254740993', '9007199254740993'],
  ['9007199254740993.0', '9007199254740992.0', '9007199254740992.0'],
  ['1e21', '1e+21', '1e+21'],
  ['1.5e300', '1.5e+300', '1.5e+300'],
  ['100000000000000000000.0', '1e+20', '1e+20'],
];

describe('pythonNumber', () => {
  it.each(PYTHON)('%s prints as Python prints it', (source, json, str) => {
    expect(pythonNumber(source)).toEqual({ json, str });
  });
});

describe('parseWithPythonNumbers', () => {
  it('marks numbers, never digits inside strings, and puts them back quoted or bare', () => {
    const numbers: PythonNumber[] = [];
    const value = parseWithPythonNumbers('{"a": [1.0, "2.0 \\"3\\""], "b": -4e0}', numbers);
    expect(numbers.map((n) => n.json)).toEqual(['1.0', '-4.0']);
    expect(pythonNumbers(JSON.stringify(value), numbers)).toBe(
      '{"a":[1.0,"2.0 \\"3\\""],"b":-4.0}',
    );
    expect(pythonNumbers('\uFDD21\uFDD3 and "\\ufdd20\\ufdd3"', numbers)).toBe('-4.0 and 1.0');
  });

  it('text that is not JSON stays text', () => {
    const numbers: PythonNumber[] = [];
    expect(parseWithPythonNumbers('{"a": 1,', numbers)).toBe('{"a": 1,');
    expect(numbers).toEqual([]);
  });
});
