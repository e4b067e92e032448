import { randomUUID } from 'node:crypto';

/**
 * Values every field of a schema is set to in turn by the tests that hold a fast check equal to
 * zod (events, the authority's requests): wrong types, edges of ranges, odd strings.
 */
export const ODD_VALUES: readonly unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  2 ** 31,
  2 ** 53,
  -(2 ** 53),
  1e300,
  '',
  '0',
  'completed',
  'team-a',
  'month-tokens',
  randomUUID(),
  randomUUID().toUpperCase(),
  '2026-11-30T12:00:00Z',
  '2026-11-30T12:00:00+01:00',
  '2026-02-30T12:00:00.000Z',
  'x'.repeat(64),
  'x'.repeat(65),
  'é'.repeat(300),
  // Astral characters: 2 UTF-16 units each (both zod and ajv count code points).
  '🧾'.repeat(40),
  '🧾'.repeat(300),
  'team-a\n',
  'a.b',
  'a*',
  [],
  {},
];
