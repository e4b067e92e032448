import { ReplyError } from 'ioredis';
import { expect, test } from 'vitest';
import { storeUnavailable } from '../src/store-error.js';

const reply = (message: string): Error => new (ReplyError as new (m: string) => Error)(message);

test('a Redis that does not answer or is not ready is worth another try; one that answered an error is not', () => {
  expect(storeUnavailable(new Error('Command timed out'))).toBe(true);
  expect(storeUnavailable(new Error('Connection is closed.'))).toBe(true);
  expect(storeUnavailable(reply('LOADING Redis is loading the dataset in memory'))).toBe(true);
  expect(storeUnavailable(reply('BUSY Redis is busy running a script'))).toBe(true);
  expect(storeUnavailable(reply('ERR Error compiling script'))).toBe(false);
  expect(storeUnavailable(reply('WRONGTYPE Operation against a key'))).toBe(false);
  // Wrapped with the node's address (loadScripts): judged by the cause.
  const wrapped = (cause: Error) => new Error('loading the scripts on Redis h:1', { cause });
  expect(storeUnavailable(wrapped(new Error('Command timed out')))).toBe(true);
  expect(storeUnavailable(wrapped(reply('ERR Error compiling script')))).toBe(false);
  expect(storeUnavailable('not an error')).toBe(false);
});
