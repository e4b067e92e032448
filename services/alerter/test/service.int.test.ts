import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { infraTest as test, startService } from '@holdfast/testkit';
import { expect } from 'vitest';

const ENTRY = fileURLToPath(new URL('../dist/main.js', import.meta.url));

test('a SIGTERM while the alerter waits for the authority config stops it at once, cleanly', async ({
  natsUrl,
  iso,
}) => {
  // No HOLDFAST_CONFIG and no authority on these names: start waits up to a minute.
  const service = await startService(
    ENTRY,
    {
      NATS_URL: natsUrl,
      ...natsNamesToEnv(iso.names),
      // Port 0, never one picked beforehand (one can be taken before the child binds it).
      ALERTER_OPS_PORT: '0',
    },
    { readyMessage: 'waiting for the authority config' },
  );
  const began = Date.now();
  await service.stop();
  expect(await service.exited).toBe(0);
  expect(Date.now() - began).toBeLessThan(5_000);
  expect(service.lines.some((l) => l.includes('failed to start'))).toBe(false);
});
