import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phase } from '../test/phases.js';
import { renderMedians } from './medians.js';
import { readEarlier, renderComparison, SCHEMA, upcast } from './result.js';
import { summarise, type Summary } from './summary.js';

const FLAGS = { rounds: 1, seconds: 6, connections: 32, rates: [], stream: false };

/** A run as JSON writes it (NaN as null), of this schema. */
function v2(summary: Summary): unknown {
  const run = { schema: SCHEMA, startedAt: 'now', commit: 'new', loadAverage: 1, flags: FLAGS };
  return JSON.parse(JSON.stringify({ ...run, summary }));
}

/** A run of schema v1: no proxy, the stack-against-direct figures on each load. */
function v1(): unknown {
  const { loads } = summarise([phase(0, 'direct', 1000, 1), phase(0, 'stack', 100, 10)], 2);
  return JSON.parse(
    JSON.stringify({
      schema: 'holdfast.bench-stack.v1',
      startedAt: 'before',
      commit: 'old',
      loadAverage: 1,
      flags: FLAGS,
      summary: {
        idleHoldfastPerSecond: {},
        loads: loads.map(({ load, direct, stack, stackVsDirect }) => ({
          load,
          direct,
          stack,
          ...stackVsDirect,
        })),
      },
    }),
  );
}

const withProxy = summarise(
  [phase(0, 'direct', 1000, 1), phase(0, 'proxy', 500, 2), phase(0, 'stack', 100, 10)],
  2,
);

describe('upcast', () => {
  it("moves a v1 load's figures to stackVsDirect and gives it no proxy", () => {
    const up = upcast(v1()) as { schema: string; summary: Summary };
    expect(up.schema).toBe(SCHEMA);
    const [load] = up.summary.loads;
    expect(load!.stackVsDirect.throughputRatio).toBeCloseTo(0.1);
    expect(load!.stackVsProxy).toEqual({ throughputRatio: null, addedP50: null, addedP99: null });
    expect(load!.edgeOverProxyCpu).toBeNull();
    expect(load!.proxy).toBeUndefined();
    expect(load).not.toHaveProperty('throughputRatio');
  });

  it('leaves a result of this schema as it is', () => {
    const run = v2(withProxy);
    expect(upcast(run)).toBe(run);
  });
});

describe('reading earlier runs', () => {
  let dir: string;
  const file = async (name: string, run: unknown) => {
    const path = join(dir, name);
    await writeFile(path, JSON.stringify(run));
    return path;
  };
  beforeAll(async () => (dir = await mkdtemp(join(tmpdir(), 'holdfast-bench-'))));
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('compares against a v1 run, its proxy figures shown as -', async () => {
    const earlier = await readEarlier(await file('v1.json', v1()));
    const text = renderComparison(earlier, withProxy);
    expect(text).toMatch(/x of direct +0\.100 +0\.100 +1\.00x/);
    expect(text).toMatch(/x of proxy +- +0\.200 +-/);
    expect(text).toMatch(/bare proxy µs\/call +- +200 +-/);
  });

  it('compares against a v2 run, proxy included', async () => {
    const earlier = await readEarlier(await file('v2.json', v2(withProxy)));
    const text = renderComparison(earlier, withProxy);
    expect(text).toMatch(/x of proxy +0\.200 +0\.200 +1\.00x/);
    expect(text).toMatch(/edge less bare proxy µs\/call +300 +300 +1\.00x/);
  });

  it('refuses what is not a result', async () => {
    await expect(readEarlier(await file('other.json', { schema: 'x' }))).rejects.toThrow(
      /not a bench:stack result/,
    );
  });

  it('takes medians of v1 runs, and refuses to mix them with later ones', async () => {
    const old = await file('old.json', v1());
    expect(await renderMedians([old, old])).toMatch(/0\.100x of direct/);
    const now = await file('now.json', v2(withProxy));
    expect(await renderMedians([now, now])).toMatch(/0\.200x of proxy/);
    await expect(renderMedians([old, now])).rejects.toThrow(/other flags or schema/);
  });
});
