import { expect, test } from 'vitest';
import { Calls } from './calls.js';

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
