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

  test('drops an event the stream cut off', () => {
    const p = new SseParser();
    expect(p.push(bytes('data: {"partial": tr'))).toEqual([]);
  });
});
