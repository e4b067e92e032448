import { describe, expect, test } from 'vitest';
import { KeyedSerial } from './keyed-serial.js';

describe('KeyedSerial', () => {
  test('a task of an idle key runs at once, and one that needs no wait leaves no promise', () => {
    const serial = new KeyedSerial();
    const ran: string[] = [];
    expect(serial.run('org-a', () => void ran.push('a1'))).toBeUndefined();
    expect(ran).toEqual(['a1']);
  });

  test('a task of a busy key waits for the ones before it, in order; other keys do not', async () => {
    const serial = new KeyedSerial();
    const ran: string[] = [];
    let release!: () => void;
    const first = serial.run('org-a', () => {
      ran.push('a1 start');
      return new Promise<void>((resolve) => (release = resolve)).then(() => {
        ran.push('a1 end');
      });
    });
    expect(first).toBeInstanceOf(Promise);
    const second = serial.run('org-a', () => void ran.push('a2'));
    expect(second).toBeInstanceOf(Promise);
    expect(serial.run('org-b', () => void ran.push('b1'))).toBeUndefined();
    expect(ran).toEqual(['a1 start', 'b1']);
    release();
    await second;
    expect(ran).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
    // Once its tasks are done the key is idle again: the next one runs at once.
    await Promise.resolve();
    expect(serial.run('org-a', () => void ran.push('a3'))).toBeUndefined();
  });

  test('a throw of an idle key is the caller’s at once; a rejection does not stop the key', async () => {
    const serial = new KeyedSerial();
    expect(() =>
      serial.run('org-a', () => {
        throw new Error('bad');
      }),
    ).toThrow('bad');
    const failed = serial.run('org-a', () => Promise.reject(new Error('later')));
    const next = serial.run('org-a', () => Promise.resolve('ok'));
    await expect(failed).rejects.toThrow('later');
    await expect(next).resolves.toBe('ok');
  });
});
