import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from './envelope.js';
import { HoldfastEvent, parseEvent } from './events.js';
import { EVENT_EXAMPLES, EXAMPLE_WINDOW } from './examples.js';
import { ODD_VALUES as SHARED_ODD_VALUES } from './odd-values.js';

/**
 * parseEvent checks with ajv (compiled from zod's JSON Schema) and asks zod only about what
 * ajv refuses. This holds the two equal: on one valid event of every type and on thousands
 * of mutations of them, ajv's verdict and output must be zod's.
 */

const window = EXAMPLE_WINDOW;
const EXAMPLES = EVENT_EXAMPLES;

/** The shared odd values and windows. */
const ODD_VALUES: unknown[] = [...SHARED_ODD_VALUES, [window], { ...window }];

function verdicts(input: unknown): void {
  const zod = HoldfastEvent.safeParse(structuredClone(input));
  const fast = parseEvent(JSON.stringify(input));
  expect(fast.ok, JSON.stringify(input).slice(0, 300)).toBe(zod.success);
  if (fast.ok && zod.success) expect(fast.value).toEqual(zod.data);
}

describe('parseEvent fast path (ajv) judges as zod', () => {
  it('on one valid event of every type, unknown keys removed as zod removes them', () => {
    for (const example of Object.values(EXAMPLES)) {
      expect(HoldfastEvent.safeParse(example).success).toBe(true);
      verdicts(example);
      verdicts({
        ...example,
        unknown: { deep: 1 },
        windows: example.windows && [{ ...window, x: 1 }],
      });
    }
    expect(Object.keys(EXAMPLES).sort()).toEqual([...EVENT_TYPES].sort());
  });

  it('on every field of every type deleted or set to an odd value, windows included', () => {
    let cases = 0;
    for (const example of Object.values(EXAMPLES)) {
      for (const key of Object.keys(example)) {
        const { [key]: _, ...without } = example;
        verdicts(without);
        cases++;
        for (const v of ODD_VALUES) {
          verdicts({ ...example, [key]: v });
          cases++;
        }
      }
      if (!Array.isArray(example.windows) || example.windows.length === 0) continue;
      for (const key of Object.keys(window)) {
        for (const v of [undefined, ...ODD_VALUES]) {
          verdicts({ ...example, windows: [{ ...window, [key]: v }] });
          cases++;
        }
      }
    }
    expect(cases).toBeGreaterThan(5_000);
  });
});
