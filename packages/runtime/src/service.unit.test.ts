import { pino } from 'pino';
import { expect, test } from 'vitest';
import { startParts, stopInReverse } from './service.js';

const silent = pino({ level: 'silent' });

test('parts stop in reverse start order; one that hangs is cut at its deadline and the rest still stop', async () => {
  const stopped: string[] = [];
  const parts = [
    { name: 'nats', stop: () => void stopped.push('nats') },
    { name: 'hangs', stop: () => new Promise<void>(() => undefined) },
    { name: 'consumer', stop: () => void stopped.push('consumer') },
  ];
  const began = Date.now();
  await expect(stopInReverse(silent, parts, 50)).rejects.toThrow('did not stop cleanly');
  expect(stopped).toEqual(['consumer', 'nats']);
  expect(Date.now() - began).toBeLessThan(1_000);
  await expect(stopInReverse(silent, [parts[0]!, parts[2]!])).resolves.toBeUndefined();
});

test('a start that fails stops what it had started, then rethrows; one that succeeds stops on stop()', async () => {
  const stopped: string[] = [];
  const failing = startParts(silent, async (parts) => {
    parts.push({ name: 'redis', stop: () => void stopped.push('redis') });
    parts.push({ name: 'nats', stop: () => void stopped.push('nats') });
    await Promise.resolve();
    throw new Error('authority unreachable');
  });
  await expect(failing).rejects.toThrow('authority unreachable');
  expect(stopped).toEqual(['nats', 'redis']);

  stopped.length = 0;
  const started = await startParts(silent, (parts) => {
    parts.push({ name: 'a', stop: () => void stopped.push('a') });
    parts.push({ name: 'b', stop: () => void stopped.push('b') });
    return { checks: [{ name: 'a', check: () => true }], extra: 42 };
  });
  expect(stopped).toEqual([]);
  expect(started.extra).toBe(42);
  expect(started.checks.map((c) => c.name)).toEqual(['a']);
  await started.stop();
  expect(stopped).toEqual(['b', 'a']);
});
