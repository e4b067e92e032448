import { describe, expect, it } from 'vitest';
import { parseCommandStats, scriptOf, slowlogSample } from './redis-stats.js';

describe('parseCommandStats', () => {
  it('reads calls and usec of every command, subcommands by their full name', () => {
    const info = [
      '# Commandstats',
      'cmdstat_evalsha:calls=10,usec=1570,usec_per_call=157.00,rejected_calls=0,failed_calls=0',
      'cmdstat_config|set:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0',
      '',
    ].join('\r\n');
    expect(parseCommandStats(info)).toEqual({
      evalsha: { calls: 10, usec: 1570 },
      'config|set': { calls: 1, usec: 9 },
    });
  });
});

describe('slowlogSample', () => {
  const client = '127.0.0.1:5000';
  const script = '?:0';
  const admit = 'hf_admit_0123456789ab';

  it('gives each script the commands Redis logged just before it, and skips the cut-off first group', () => {
    // SLOWLOG GET lists the newest first.
    const entries = [
      [7, 0, 3, ['xread', 'BLOCK', '0'], client],
      [6, 0, 100, ['fcall', admit, '1', 'k'], client],
      [5, 0, 10, ['hset', 'k', 'f', 'v'], script],
      [4, 0, 20, ['hincrby', 'k', 'f', '1'], script],
      [3, 0, 90, ['evalsha', 'bbbbbbbbbb', '0'], client],
      [2, 0, 5, ['get', 'k'], script],
      [1, 0, 200, ['fcall', admit, '1', 'k'], client],
      [0, 0, 5, ['hget', 'k', 'f'], script],
    ] as const;
    const sample = slowlogSample(
      entries.map(([id, at, usec, args, addr]) => [id, at, usec, [...args], addr]),
    );
    expect(sample.scripts).toEqual({
      admit: { samples: 1, usecPerCall: 100, commandsPerCall: 2, commandsUsecPerCall: 30 },
      'sha:bbbbbbbb': { samples: 1, usecPerCall: 90, commandsPerCall: 1, commandsUsecPerCall: 5 },
    });
    expect(sample.topLevel).toEqual(['evalsha', 'fcall', 'xread']);
  });

  it("leaves the bench's own commands out", () => {
    const entries = [
      [1, 0, 9, ['config', 'set', 'slowlog-log-slower-than', '0'], client],
      [0, 0, 1, ['ping'], client],
    ] as const;
    const sample = slowlogSample(
      entries.map(([id, at, usec, args, addr]) => [id, at, usec, [...args], addr]),
    );
    expect(sample.topLevel).toEqual([]);
  });
});

describe('scriptOf', () => {
  it("names the authority's functions by script, other scripts by what identifies them", () => {
    expect(scriptOf(['FCALL', 'hf_close_0123456789ab', '2'])).toBe('close');
    expect(scriptOf(['fcall', 'someone_else', '0'])).toBe('fn:someone_else');
    expect(scriptOf(['evalsha', 'bbbbbbbbbb', '0'])).toBe('sha:bbbbbbbb');
    expect(scriptOf(['eval', 'return 1', '0'])).toBe('eval');
    expect(scriptOf(['hget', 'k', 'f'])).toBeUndefined();
  });
});
