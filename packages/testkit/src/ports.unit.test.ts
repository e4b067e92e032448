import { expect, test } from 'vitest';
import { freePort, reservePorts } from './ports.js';

test('freePort never hands out a port twice, nor one reserved for a server of this process', async () => {
  const first = await freePort();
  reservePorts([first + 1]);
  const ports = [first];
  for (let i = 0; i < 300; i++) ports.push(await freePort());
  expect(new Set(ports).size).toBe(ports.length);
  expect(ports).not.toContain(first + 1);
});
