import { describe, expect, it } from 'vitest';
import { FairQueue } from './fair-queue.js';

/** Takes every entry, in the order the queue hands them out. */
function drain<T>(queue: FairQueue<T>): T[] {
  const out: T[] = [];
  for (let taken = queue.shift(); taken; taken = queue.shift()) out.push(taken.item);
  return out;
}

describe('FairQueue', () => {
  it('takes a newcomer right after the entry already taken, not behind a backlog', () => {
    const queue = new FairQueue<string>();
    for (let i = 1; i <= 10; i++) queue.push('a', 1_000_000, `a${i}`);
    expect(queue.shift()?.item).toBe('a1'); // running now
    queue.push('b', 20_000, 'b1');
    expect(drain(queue)).toEqual(['b1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9', 'a10']);
  });

  it('serves owners that both keep work queued the same cost, however it is cut', () => {
    const queue = new FairQueue<string>();
    for (let i = 1; i <= 3; i++) queue.push('big', 300, `big${i}`);
    for (let i = 1; i <= 9; i++) queue.push('small', 100, `s${i}`);
    expect(drain(queue)).toEqual([
      'big1',
      's1',
      's2',
      's3',
      'big2',
      's4',
      's5',
      's6',
      'big3',
      's7',
      's8',
      's9',
    ]);
  });

  it('keeps FIFO order within an owner and arrival order between equal tags', () => {
    const queue = new FairQueue<string>();
    queue.push('a', 10, 'a1');
    queue.push('b', 10, 'b1');
    queue.push('a', 10, 'a2');
    queue.push('c', 10, 'c1');
    expect(drain(queue)).toEqual(['a1', 'b1', 'c1', 'a2']);
  });

  it('skips owners the caller may not start now, and takes them later', () => {
    const queue = new FairQueue<string>();
    queue.push('a', 10, 'a1');
    queue.push('a', 10, 'a2');
    queue.push('b', 10, 'b1');
    expect(queue.shift((owner) => owner !== 'a')?.item).toBe('b1');
    expect(queue.shift((owner) => owner !== 'a')).toBeUndefined();
    expect(drain(queue)).toEqual(['a1', 'a2']);
  });

  it('puts an entry back at the head of its lane with its tag; removes a waiting one', () => {
    const queue = new FairQueue<string>();
    queue.push('a', 100, 'a1');
    queue.push('a', 100, 'a2');
    queue.push('b', 100, 'b1');
    const first = queue.shift()!;
    expect(first.item).toBe('a1');
    queue.unshift('a', first);
    expect(queue.remove('a', 'a2')).toBe(true);
    expect(queue.remove('a', 'a2')).toBe(false);
    expect(queue.size).toBe(2);
    expect(drain(queue)).toEqual(['a1', 'b1']);
  });

  it('remembers an owner that just had its turn: its next entry waits for the others', () => {
    const queue = new FairQueue<string>();
    queue.push('a', 1_000, 'a1');
    queue.shift();
    // a's next entry starts after its first one's cost; b's starts now.
    queue.push('a', 10, 'a2');
    queue.push('b', 10, 'b1');
    queue.push('b', 10, 'b2');
    expect(drain(queue)).toEqual(['b1', 'b2', 'a2']);
  });
});
