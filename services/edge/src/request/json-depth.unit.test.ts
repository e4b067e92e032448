import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from './json-depth.js';

describe('nestsDeeperThan', () => {
  const objects = (depth: number): unknown =>
    JSON.parse('{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
  const arrays = (depth: number): unknown => JSON.parse('['.repeat(depth) + ']'.repeat(depth));

  it('counts objects and arrays, each a level; scalars are none', () => {
    expect(nestsDeeperThan(1, 0)).toBe(false);
    expect(nestsDeeperThan('x', 0)).toBe(false);
    expect(nestsDeeperThan(null, 0)).toBe(false);
    expect(nestsDeeperThan({}, 1)).toBe(false);
    expect(nestsDeeperThan({}, 0)).toBe(true);
    expect(nestsDeeperThan(objects(128), 128)).toBe(false);
    expect(nestsDeeperThan(objects(129), 128)).toBe(true);
    expect(nestsDeeperThan(arrays(128), 128)).toBe(false);
    expect(nestsDeeperThan(arrays(129), 128)).toBe(true);
    expect(nestsDeeperThan({ a: [{ b: [1, 2, { c: {} }] }] }, 6)).toBe(false);
    expect(nestsDeeperThan({ a: [{ b: [1, 2, { c: {} }] }] }, 5)).toBe(true);
  });

  it('finds a deep branch beside shallow ones, and walks any depth without recursion', () => {
    expect(nestsDeeperThan({ x: 1, y: [1, 2], z: { deep: objects(200) } }, 128)).toBe(true);
    expect(nestsDeeperThan(arrays(1_000_000), 128)).toBe(true);
    expect(nestsDeeperThan(objects(1_000_000), 2_000_000)).toBe(false);
  });
});
