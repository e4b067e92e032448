import { createRedis } from '@holdfast/budget-authority';
import { findBinary, startRedisServer } from '@holdfast/testkit';

/** A Redis of this test's own, so pausing it stalls no other test. */
export async function ownRedis() {
  const bin = findBinary('redis-server');
  if (!bin) throw new Error('redis-server is not on PATH');
  const server = await startRedisServer(bin);
  const admin = createRedis(server.url, 5_000);
  await admin.connect();
  return {
    url: server.url,
    /** Every client waits this long: commands queue, then run in order. */
    pause: (ms: number) => admin.call('CLIENT', 'PAUSE', String(ms), 'ALL'),
    stop: async () => {
      admin.disconnect();
      await server.stop();
    },
  };
}
