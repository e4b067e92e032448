import { expect, test } from 'vitest';
import { purgeForgetsPending } from './purge-acked.js';

test('a purge forgets unacked deliveries on nats-server before 2.9.15, and on a server whose version is unknown', () => {
  for (const v of ['2.9.10', '2.9.14', '2.8.4', '1.0.0', undefined, 'dev']) {
    expect(purgeForgetsPending(v)).toBe(true);
  }
  for (const v of ['2.9.15', '2.9.25', '2.10.0', '2.11.3', 'v2.12.1', '3.0.0']) {
    expect(purgeForgetsPending(v)).toBe(false);
  }
});
