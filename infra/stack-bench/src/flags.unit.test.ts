import { describe, expect, it } from 'vitest';
import { parseFlags } from './flags.js';

describe('parseFlags', () => {
  it('defaults to 3 rounds of 6 s, 32 connections, 100/s and 300/s, no streaming', () => {
    expect(parseFlags([])).toMatchObject({
      rounds: 3,
      seconds: 6,
      connections: 32,
      rates: [100, 300],
      stream: false,
      completionTokens: 16,
      cpuProf: [],
      skipFloor: false,
      keep: false,
    });
  });

  it('reads lists and numbers', () => {
    const flags = parseFlags([
      '--rates',
      '50,200,1000',
      '--rounds',
      '5',
      '--cpu-prof',
      'edge,authority,bare-proxy,floor-edge',
      '--skip-floor',
    ]);
    expect(flags).toMatchObject({
      rates: [50, 200, 1000],
      rounds: 5,
      cpuProf: ['edge', 'authority', 'bare-proxy', 'floor-edge'],
      skipFloor: true,
    });
  });

  it('refuses unknown flags and bad values', () => {
    expect(() => parseFlags(['--nope'])).toThrow();
    expect(() => parseFlags(['--rounds', '0'])).toThrow(/rounds/);
    expect(() => parseFlags(['--cpu-prof', 'redis'])).toThrow(/cpuProf/);
  });
});
