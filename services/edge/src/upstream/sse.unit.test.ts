import { describe, expect, test } from 'vitest';
import { SseParser, sseEvent } from './sse.js';

const bytes = (s: string) => new TextEncoder().encode(s);
const data = (events: { data: string }[]) => events.map((e) => e.data);

describe('SseParser', () => {
  test('yields the data of complete events, across chunk boundaries and CRLF', () => {
    const p = new SseParser();
    expect(data(p.push(bytes('data: {"a":1}\n\ndata: {"b"')))).toEqual(['{"a":1}']);
    expect(p.push(bytes(':2}\r\n\r\n: comment\n\nevent: x\ndata:[DONE]\n\n'))).toEqual([
      { event: undefined, data: '{"b":2}' },
      { event: 'x', data: '[DONE]' },
    ]);
  });

  test('keeps event names (Anthropic and Responses streams), reset after each event', () => {
    const p = new SseParser();
    const text = 'event: message_start\ndata: {"type":"message_start"}\n\ndata: {"x":1}\n\n';
    expect(p.push(bytes(text))).toEqual([
      { event: 'message_start', data: '{"type":"message_start"}' },
      { event: undefined, data: '{"x":1}' },
    ]);
    expect(sseEvent('{}', 'ping')).toBe('event: ping\ndata: {}\n\n');
    expect(sseEvent('[DONE]')).toBe('data: [DONE]\n\n');
  });

  test('joins multi-line data and splits a multi-byte character safely', () => {
    const p = new SseParser();
    const euro = bytes('data: €\ndata: x\n\n');
    expect(p.push(euro.slice(0, 7))).toEqual([]);
    expect(data(p.push(euro.slice(7)))).toEqual(['€\nx']);
  });

  test('decodes as TextDecoder does, whatever the bytes and wherever a read ends', () => {
    // The reference: the whole stream decoded at once (invalid bytes become U+FFFD, a leading
    // BOM is dropped), then split into events. Random bytes (valid, truncated and invalid UTF-8,
    // BOMs, newlines), each stream fed in random reads.
    const pool = [
      0x61, 0x0a, 0x0a, 0x0d, 0x3a, 0x20, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xc3, 0xa9,
      0xed, 0xa0, 0x80, 0xff, 0xc0, 0xef, 0xbb, 0xbf, 0x80, 0xbf, 0xf4, 0x90, 0xe0,
    ];
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const prefix = bytes('data: ');
    for (let run = 0; run < 3_000; run++) {
      const body = Array.from({ length: 1 + rand(24) }, () => pool[rand(pool.length)]!);
      const lead = rand(4) === 0 ? [0xef, 0xbb, 0xbf] : [];
      const all = Uint8Array.from([...lead, ...prefix, ...body, 0x0a, 0x0a]);
      const whole = new TextDecoder().decode(all);
      const expected = new SseParser().push(bytes(whole));
      const p = new SseParser();
      const got: { event: string | undefined; data: string }[] = [];
      for (let at = 0; at < all.length;) {
        const next = Math.min(all.length, at + 1 + rand(6));
        got.push(...p.push(all.subarray(at, next)));
        at = next;
      }
      expect(got).toEqual(expected);
    }
  });

  test('drops an event the stream cut off', () => {
    const p = new SseParser();
    expect(p.push(bytes('data: {"partial": tr'))).toEqual([]);
  });
});

describe('SseParser, long lines', () => {
  test('a 12 MB event in 64 KB reads is one event; a line past 16 Mi characters is refused', () => {
    const p = new SseParser();
    const payload = 'x'.repeat(12 * 1024 * 1024);
    const stream = bytes(`data: ${payload}\r\n\r\ndata: next\n\n`);
    const got: string[] = [];
    for (let at = 0; at < stream.length; at += 64 * 1024) {
      got.push(...data(p.push(stream.subarray(at, at + 64 * 1024))));
    }
    expect(got.map((d) => d.length)).toEqual([payload.length, 4]);
    expect(got[0] === payload).toBe(true);

    const long = new SseParser();
    const read = bytes('y'.repeat(1024 * 1024));
    expect(long.push(bytes('data: '))).toEqual([]);
    for (let i = 0; i < 15; i++) expect(long.push(read)).toEqual([]);
    expect(() => long.push(read)).toThrow(/longer than 16777216 characters/);
  });
});
