import { expect, test } from 'vitest';
import { ReleaseRequest, SettleRequest } from './settle.js';

const SHARED = [
  'reservationId',
  'tenant',
  'org',
  'upstream',
  'model',
  'keyId',
  'endUser',
  'responseId',
  'itemIds',
] as const;

test('a settle and a release name the reservation and the stored output with one set of fields', () => {
  for (const field of SHARED) expect(ReleaseRequest.shape[field]).toBe(SettleRequest.shape[field]);
  expect(Object.keys(SettleRequest.shape)).toEqual([
    ...SHARED.slice(0, 7),
    'usage',
    'outcome',
    ...SHARED.slice(7),
  ]);
  expect(Object.keys(ReleaseRequest.shape)).toEqual([
    ...SHARED.slice(0, 7),
    'reason',
    'answeredRequests',
    ...SHARED.slice(7),
  ]);
});
