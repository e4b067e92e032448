import { describe, expect, it } from 'vitest';
import { nextPull } from './pulls.js';

describe('nextPull', () => {
  const end = { waited: false, asked: 64, got: 10, failed: false };

  it('pulls again at once after a burst that came back full', () => {
    expect(nextPull({ ...end, got: 64 })).toBe('now');
  });

  it('waits for the next message after a pull that found nothing, or a wait that expired', () => {
    expect(nextPull({ ...end, got: 0 })).toBe('wait');
    expect(nextPull({ waited: true, asked: 1, got: 0, failed: false })).toBe('wait');
  });

  it('pulls the next burst an interval later after a partial one or a wait that ended', () => {
    expect(nextPull(end)).toBe('later');
    expect(nextPull({ waited: true, asked: 1, got: 1, failed: false })).toBe('later');
  });

  it('backs off an interval after a status that is not 404 or 408', () => {
    expect(nextPull({ ...end, got: 0, failed: true })).toBe('later');
  });
});
