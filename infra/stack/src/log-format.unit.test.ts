import { describe, expect, it } from 'vitest';
import { formatLine, prefix } from './log-format.js';

describe('formatLine', () => {
  it('turns a pino line into time, level, message and the other fields', () => {
    const line = JSON.stringify({
      level: 40,
      time: '2026-11-30T12:00:01.123Z',
      pid: 7,
      hostname: 'h',
      name: 'edge',
      msg: 'ready',
      port: 8080,
      batch: { maxRows: 10 },
    });
    expect(formatLine(line)).toBe('12:00:01.123 WARN  ready port=8080 batch={"maxRows":10}');
  });

  it('passes other lines through unchanged', () => {
    expect(formatLine('[25023] [INF] Server is ready')).toBe('[25023] [INF] Server is ready');
    expect(formatLine('{not json')).toBe('{not json');
  });

  it('pads the prefix and colours it only when asked', () => {
    expect(prefix('edge', 0, { width: 6, colour: false })).toBe('edge   |');
    expect(prefix('edge', 0, { width: 6, colour: true })).toBe('\u001b[36medge   |\u001b[0m');
  });
});
