import { expect, test } from 'vitest';
import { Ok } from '@holdfast/runtime';
import type { EdgeMetrics } from '../metrics.js';
import { HoldGrowth, holdCanGrow } from './growth.js';
import type { LiveCall } from './in-flight.js';
import type { OutputMeter } from './output-meter.js';
import type { AuthorityPort } from './ports.js';

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
  const growth = new HoldGrowth({
    authority: { extend } as unknown as AuthorityPort,
    metrics: { extensions: { inc: () => {} } } as unknown as EdgeMetrics,
    logger: { warn: () => {} },
    hold: { reservationId: 'r', tenant: 't', org: 'o' },
    covered: 100,
    maxTokens: 1_000,
    timeoutMs: 1_000,
    configVersion: () => 7,
  });
  const meter = { overLimit: () => true, counted: 90 } as unknown as OutputMeter;
  const live = { signal: new AbortController().signal, abort: () => {} } as unknown as LiveCall;
  await growth.gate(meter, live);
  expect(asked).toEqual([expect.objectContaining({ reservationId: 'r', configVersion: 7 })]);
  expect(growth.covered).toBe(1_000);
});
