import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCommandStats, scriptNames, slowlogSample } from './redis-stats.js';

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

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
  const names = new Map([['aaa', 'admit']]);

  it('gives each script the commands Redis logged just before it, and skips the cut-off first group', () => {
    // SLOWLOG GET lists the newest first.
    const entries = [
      [7, 0, 3, ['xread', 'BLOCK', '0'], client],
      [6, 0, 100, ['evalsha', 'aaa', '1', 'k'], client],
      [5, 0, 10, ['hset', 'k', 'f', 'v'], script],
      [4, 0, 20, ['hincrby', 'k', 'f', '1'], script],
      [3, 0, 90, ['evalsha', 'bbbbbbbbbb', '0'], client],
      [2, 0, 5, ['get', 'k'], script],
      [1, 0, 200, ['evalsha', 'aaa', '1', 'k'], client],
      [0, 0, 5, ['hget', 'k', 'f'], script],
    ] as const;
    const sample = slowlogSample(
      entries.map(([id, at, usec, args, addr]) => [id, at, usec, [...args], addr]),
      names,
    );
    expect(sample.scripts).toEqual({
      admit: { samples: 1, usecPerCall: 100, commandsPerCall: 2, commandsUsecPerCall: 30 },
      'sha:bbbbbbbb': { samples: 1, usecPerCall: 90, commandsPerCall: 1, commandsUsecPerCall: 5 },
    });
    expect(sample.topLevel).toEqual(['evalsha', 'xread']);
  });

  it("leaves the bench's own commands out", () => {
    const entries = [
      [1, 0, 9, ['config', 'set', 'slowlog-log-slower-than', '0'], client],
      [0, 0, 1, ['ping'], client],
    ] as const;
    const sample = slowlogSample(
      entries.map(([id, at, usec, args, addr]) => [id, at, usec, [...args], addr]),
      names,
    );
    expect(sample.topLevel).toEqual([]);
  });
});

describe('scriptNames', () => {
  it('names a script sent as lib.lua + newline + its file, and one sent alone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'holdfast-lua-'));
    try {
      await writeFile(join(dir, 'lib.lua'), 'local x = 1');
      await writeFile(join(dir, 'admit.lua'), 'return x');
      const names = scriptNames(dir);
      expect(names.get(sha1('local x = 1\nreturn x'))).toBe('admit');
      expect(names.get(sha1('return x'))).toBe('admit');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is empty when the folder is gone', () => {
    expect(scriptNames('/nonexistent/lua').size).toBe(0);
  });
});
