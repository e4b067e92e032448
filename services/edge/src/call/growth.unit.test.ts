import { expect, test } from 'vitest';
import { Ok } from '@holdfast/runtime';
import type { EdgeMetrics } from '../metrics.js';
import { HoldGrowth, holdCanGrow } from './growth.js';
import type { LiveCall } from './in-flight.js';
import type { OutputMeter } from './output-meter.js';
import type { AuthorityPort } from './ports.js';

/** A growth asking `extend`, its hold covering `covered` of 1,000 tokens. */
function growthOf(extend: unknown, covered: number, configVersion?: () => number) {
  return new HoldGrowth({
    authority: { extend } as unknown as AuthorityPort,
    metrics: { extensions: { inc: () => {} } } as unknown as EdgeMetrics,
    logger: { warn: () => {} },
    hold: { reservationId: 'r', tenant: 't', org: 'o' },
    covered,
    maxTokens: 1_000,
    timeoutMs: 1_000,
    configVersion,
  });
}

test('a hold grows only on a surface that streams what the model writes, with no output the edge cannot see', () => {
  expect(holdCanGrow(true, {}, { reasoning: false })).toBe(true);
  expect(holdCanGrow(false, {}, undefined)).toBe(false);
  // Reasoning asked, or a model that reasons unasked: thought before anything streams.
  expect(holdCanGrow(true, { reasoning: true }, undefined)).toBe(false);
  expect(holdCanGrow(true, {}, { reasoning: true })).toBe(false);
  // Audio: billed several audio tokens for each transcript token the edge reads.
  expect(holdCanGrow(true, { audioOutput: true }, undefined)).toBe(false);
});

test('an extend carries the config version the edge serves, so a replica behind it catches up first', async () => {
  const asked: Record<string, unknown>[] = [];
  const extend = (req: Record<string, unknown>) => {
    asked.push(req);
    const value = { status: 'extended', heldTokens: 0, heldMicroUsd: 0, windows: [] };
    return Promise.resolve(Ok({ ...value, coveredOutputTokens: 1_000 }));
  };
  const growth = growthOf(extend, 100, () => 7);
  const meter = { overLimit: () => true, counted: 90 } as unknown as OutputMeter;
  const live = { signal: new AbortController().signal, abort: () => {} } as unknown as LiveCall;
  await growth.gate(meter, live);
  expect(asked).toEqual([expect.objectContaining({ reservationId: 'r', configVersion: 7 })]);
  expect(growth.covered).toBe(1_000);
});

test('a refused growth ends the call at the end of its cover, not where the refusal came', async () => {
  const extend = () =>
    Promise.resolve(
      Ok({
        status: 'refused',
        heldTokens: 0,
        heldMicroUsd: 0,
        coveredOutputTokens: 107,
        windows: [],
      }),
    );
  const growth = growthOf(extend, 107);
  let counted = 0;
  const meter = {
    overLimit: (limit: number) => counted > limit,
    get counted() {
      return counted;
    },
  } as unknown as OutputMeter;
  const ended: string[] = [];
  const controller = new AbortController();
  const live = {
    signal: controller.signal,
    abort: (why: string) => {
      ended.push(why);
      controller.abort();
    },
  } as unknown as LiveCall;
  // 64 tokens before the end of the cover the edge asks; the refusal is in at 49.
  counted = 44;
  expect(growth.gate(meter, live)).toBeUndefined();
  await Promise.resolve();
  await Promise.resolve();
  for (counted = 45; counted <= 107 - 16; counted++)
    expect(growth.gate(meter, live)).toBeUndefined();
  expect(ended).toEqual([]);
  // The next token passes what the cover keeps clear for the tokens in flight: the call ends.
  await growth.gate(meter, live);
  expect(ended).toEqual(['budget_exhausted']);
});
