import { createHash, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { closeEventId } from '../src/handlers/close.js';

/** The ids as they were derived before the one-shot hash (createHash, update, digest). */
function before(reservationId: string, op: string): string {
  const h = createHash('sha256').update(`${reservationId}:${op}`).digest('hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

describe('closeEventId', () => {
  it('derives the same id as before for every operation (a failover replay is deduplicated)', () => {
    const ops = [
      'settle',
      'release',
      'expire',
      'settle:overrun',
      'release:overrun',
      'expire:overrun',
    ];
    for (let i = 0; i < 200; i++) {
      const id = randomUUID();
      for (const op of ops) expect(closeEventId(id, op)).toBe(before(id, op));
    }
    // A fixed value, so the derivation itself cannot drift with the reference above.
    expect(closeEventId('00000000-0000-4000-8000-000000000000', 'settle')).toMatchInlineSnapshot(
      `"c88a7007-3931-8397-a179-99d036bf815b"`,
    );
  });
});
