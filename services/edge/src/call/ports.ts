import type { AuthorityClient } from '@holdfast/runtime';

/**
 * What a call needs of the budget authority. The NATS client (`AuthorityClient`) is the real
 * one; unit tests of the call pipeline pass an in-memory one.
 */
export type AuthorityPort = Pick<
  AuthorityClient,
  'admit' | 'owns' | 'extend' | 'renew' | 'settle' | 'release' | 'moveCapacity' | 'retryCapacity'
>;
