import { describe, expect, it } from 'vitest';
import { parseIo, parseMachineBusy, parseStatCpu } from './cpu.js';

describe('parseStatCpu', () => {
  it('adds utime and stime, in µs (100 ticks a second)', () => {
    const stat = '4242 (node) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 11 0 1 2 3';
    expect(parseStatCpu(stat)).toBe((250 + 30) * 10_000);
  });

  it('counts fields from the last parenthesis: command names may hold spaces and ")"', () => {
    const stat = '7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 12 3 0 0 20 0 1 0 1 2 3';
    expect(parseStatCpu(stat)).toBe(15 * 10_000);
  });

  it('throws on something that is not a stat line', () => {
    expect(() => parseStatCpu('nonsense')).toThrow(/stat line/);
  });
});

describe('parseMachineBusy', () => {
  it('is user + nice + system + irq + softirq + steal of the cpu line, idle and iowait left out', () => {
    const stat = 'cpu  100 2 30 5000 7 1 4 8 0 0\ncpu0 50 1 15 2500 3 0 2 4 0 0\n';
    expect(parseMachineBusy(stat)).toBe((100 + 2 + 30 + 1 + 4 + 8) * 10_000);
  });
});

describe('parseIo', () => {
  it('reads syscr and syscw of a /proc/<pid>/io file', () => {
    const io =
      'rchar: 100\nwchar: 200\nsyscr: 12\nsyscw: 34\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n';
    expect(parseIo(io)).toEqual({ reads: 12, writes: 34 });
  });

  it('throws on something that is not an io file', () => {
    expect(() => parseIo('nonsense')).toThrow(/io file/);
  });
});
