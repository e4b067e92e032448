import { describe, expect, test } from 'vitest';
import { SseParser } from './sse.js';

const bytes = (s: string) => new TextEncoder().encode(s);

describe('SseParser', () => {
  test('yields the data of complete events, across chunk boundaries and CRLF', () => {
    const p = new SseParser();
    expect(p.push(bytes('data: {"a":1}\n\ndata: {"b"'))).toEqual(['{"a":1}']);
    expect(p.push(bytes(':2}\r\n\r\n: comment\n\nevent: x\ndata:[DONE]\n\n'))).toEqual([
      '{"b":2}',
      '[DONE]',
    ]);
  });

  test('joins multi-line data and splits a multi-byte character safely', () => {
    const p = new SseParser();
    const euro = bytes('data: €\ndata: x\n\n');
    expect(p.push(euro.slice(0, 7))).toEqual([]);
    expect(p.push(euro.slice(7))).toEqual(['€\nx']);
  });

  test('drops an event the stream cut off', () => {
    const p = new SseParser();
    expect(p.push(bytes('data: {"partial": tr'))).toEqual([]);
  });
});
