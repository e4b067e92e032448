import { startOwnRedis, type OwnRedis } from '@holdfast/testkit';
import { afterAll, beforeAll, expect } from 'vitest';
import { startTestAuthority } from '../src/testing.js';
import { admissionOf, authorityTest as test, miniCall, BASE_CONFIG } from './harness.js';

/**
 * A Redis that holds its replies past the 1 s command timeout while an authority starts (an
 * fsync stall under appendfsync always on a busy disk; here CLIENT PAUSE of every write) is
 * waited for: each startup step is run again, and the authority serves once Redis answers. It
 * used to fail its start at the first write ("Command timed out"). A private Redis: the pause
 * would stall every other test's.
 */
let redis: OwnRedis;
beforeAll(async () => {
  redis = await startOwnRedis();
});
afterAll(() => redis?.stop());

test('an authority started while Redis holds its writes for 2.5 s waits for it, then serves', async ({
  nc,
  natsUrl,
  iso,
}) => {
  await redis.pause(2_500, 'WRITE');
  const started = Date.now();
  const h = await startTestAuthority({
    natsUrl,
    redisUrl: redis.url,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: BASE_CONFIG,
  });
  try {
    // It did wait: the pause outlasted more than one command timeout.
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    admissionOf(await h.client.admit(miniCall(100, 100)));
  } finally {
    await h.stop();
  }
}, 30_000);
