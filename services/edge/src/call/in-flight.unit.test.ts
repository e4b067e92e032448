import { expect, test, vi } from 'vitest';
import { Calls } from './in-flight.js';

test('a suspension ends the calls of the tenant and of teams below it, not of others', () => {
  const calls = new Calls();
  const team = calls.start({ id: 'team', chain: ['team', 'org'] });
  const sibling = calls.start({ id: 'sibling', chain: ['sibling', 'org'] });
  const other = calls.start({ id: 'other', chain: ['other'] });
  expect(calls.suspend('team', 0)).toBe(1);
  expect([team.abortedBy, sibling.abortedBy, other.abortedBy]).toEqual([
    'suspended',
    undefined,
    undefined,
  ]);
  expect(calls.suspend('org', 0)).toBe(2);
  expect(sibling.abortedBy).toBe('suspended');
  expect(other.signal.aborted).toBe(false);
  for (const c of [team, sibling, other]) calls.end(c);
  expect(calls.count()).toBe(0);
  calls.close();
});

test('a late suspension notice ends only the calls admitted before the suspension', () => {
  const calls = new Calls();
  const before = calls.start({ id: 'team', chain: ['team'] }, undefined, 1_000);
  const afterResume = calls.start({ id: 'team', chain: ['team'] }, undefined, 3_000);
  // Suspended at t=2,000, resumed since; the notice arrives now, with the second call live.
  expect(calls.suspend('team', 0, 2_000)).toBe(1);
  expect([before.abortedBy, afterResume.abortedBy]).toEqual(['suspended', undefined]);
  calls.close();
});

test('a resume cancels the grace end still pending, and the grace spares later calls', () => {
  vi.useFakeTimers({ now: 10_000 });
  try {
    const calls = new Calls();
    const first = calls.start({ id: 'team', chain: ['team'] });
    expect(calls.suspend('team', 5_000)).toBe(1);
    vi.advanceTimersByTime(1_000);
    expect(calls.resume('team')).toBe(1);
    vi.advanceTimersByTime(10_000);
    expect(first.abortedBy).toBeUndefined();

    calls.suspend('team', 5_000);
    vi.advanceTimersByTime(1_000);
    const later = calls.start({ id: 'team', chain: ['team'] });
    vi.advanceTimersByTime(5_000);
    expect([first.abortedBy, later.abortedBy]).toEqual(['suspended', undefined]);
    expect(calls.resume('team')).toBe(0);
    calls.close();
  } finally {
    vi.useRealTimers();
  }
});

test('the tenants seen suspended, a team by its own or its org suspension, until a resume', () => {
  const calls = new Calls();
  expect(calls.suspended(['team', 'org'])).toBe(false);
  calls.suspend('org', 1_000);
  expect(calls.suspended(['team', 'org'])).toBe(true);
  expect(calls.suspended(['other'])).toBe(false);
  calls.resume('org');
  expect(calls.suspended(['team', 'org'])).toBe(false);
  // What the authority said at start: a tenant an event has spoken of since stays as it said.
  expect(calls.suspendedAlready(['org', 'other'])).toEqual(['other']);
  expect(calls.suspended(['team', 'org'])).toBe(false);
  expect(calls.suspended(['other'])).toBe(true);
  calls.close();
});
