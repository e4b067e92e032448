import { createHash } from 'node:crypto';
import { z } from 'zod';

/**
 * The end users a team at its `maxEndUsers` tracks, as a Bloom filter (Refused
 * `trackedFilter`, built by admit.lua's trackedFilter; this file is its other half). An id is
 * hashed once, SHA-1 of its bytes (ids are ASCII): the first 13 hex digits are a 52-bit number
 * v, h1 = v mod 2^26, h2 = floor(v / 2^26); its bits are (h1 + i * h2) mod m for i < k, m the
 * filter's bits (16 an end user, 512 at least), bit p being bit (p mod 8), the lowest first,
 * of byte floor(p / 8).
 *
 * An id the filter has not may be refused at once (it is not tracked); one it has is tracked
 * or, rarely (about 0.24% at 16 bits an id and k 4), a false positive: asked as before.
 */

/** Hashes an id sets (admit.lua's FILTER_K). */
export const END_USER_FILTER_K = 4;
/** Bits a tracked end user takes (admit.lua's FILTER_BITS). */
const END_USER_FILTER_BITS = 16;
/** The most end users a filter holds (admit.lua's FILTER_MAX): 32 KiB, 64 KiB of hex. */
export const END_USER_FILTER_MAX = 16_384;
/**
 * The fewest bytes a filter has (admit.lua's FILTER_LEAST): in a smaller one, an id whose h2
 * is a multiple of its bits sets one bit k times (a new end user held 1 time in 5 for 2 tracked).
 */
const END_USER_FILTER_LEAST = 64;

export const EndUserFilter = z.object({
  /** Hashes an id sets. */
  k: z.int().min(1).max(16),
  /** The filter's bytes in hex, byte 0 first. */
  bits: z
    .string()
    .max((END_USER_FILTER_MAX * END_USER_FILTER_BITS) / 4)
    .regex(/^(?:[0-9a-f]{2})+$/),
});
export type EndUserFilter = z.infer<typeof EndUserFilter>;

/** A filter read for lookups. */
export interface EndUserSet {
  k: number;
  bytes: Buffer;
}

export function endUserSet(filter: EndUserFilter): EndUserSet {
  return { k: filter.k, bytes: Buffer.from(filter.bits, 'hex') };
}

const SPLIT = 2 ** 26;

/** The bits `endUser` sets in a filter of `m` bits with `k` hashes. */
function bitsOf(endUser: string, k: number, m: number): number[] {
  const v = parseInt(createHash('sha1').update(endUser).digest('hex').slice(0, 13), 16);
  const h1 = v % SPLIT;
  const h2 = Math.floor(v / SPLIT);
  return Array.from({ length: k }, (_, i) => (h1 + i * h2) % m);
}

/** Whether the filter may hold `endUser` (false: it surely does not). */
export function mayTrack(set: EndUserSet, endUser: string): boolean {
  const m = set.bytes.length * 8;
  return (
    m > 0 && bitsOf(endUser, set.k, m).every((p) => (set.bytes[p >> 3]! & (1 << (p & 7))) !== 0)
  );
}

/** The filter of these end users, as admit.lua builds it (tests; sizing). */
export function endUserFilterOf(endUsers: readonly string[]): EndUserFilter {
  const bytes = Buffer.alloc(
    Math.max(END_USER_FILTER_LEAST, Math.ceil((endUsers.length * END_USER_FILTER_BITS) / 8)),
  );
  const m = bytes.length * 8;
  for (const u of endUsers) {
    for (const p of bitsOf(u, END_USER_FILTER_K, m)) bytes[p >> 3]! |= 1 << (p & 7);
  }
  return { k: END_USER_FILTER_K, bits: bytes.toString('hex') };
}
