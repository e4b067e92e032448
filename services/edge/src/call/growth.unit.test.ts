import { expect, test } from 'vitest';
import { holdCanGrow } from './growth.js';

test('a hold grows only on a surface that streams what the model writes, with no output the edge cannot see', () => {
  expect(holdCanGrow(true, {}, { reasoning: false })).toBe(true);
  expect(holdCanGrow(false, {}, undefined)).toBe(false);
  // Reasoning asked, or a model that reasons unasked: thought before anything streams.
  expect(holdCanGrow(true, { reasoning: true }, undefined)).toBe(false);
  expect(holdCanGrow(true, {}, { reasoning: true })).toBe(false);
  // Audio: billed several audio tokens for each transcript token the edge reads.
  expect(holdCanGrow(true, { audioOutput: true }, undefined)).toBe(false);
});
