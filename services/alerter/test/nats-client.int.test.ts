import { createRequire } from 'node:module';
import { createLogger } from '@holdfast/runtime';
import { infraTest as test } from '@holdfast/testkit';
import { expect } from 'vitest';
import { connectAlerterNats } from '../src/service.js';

/** nats.js's error classes, as its request code reads them (a CommonJS exports object). */
const fromTransport = createRequire(
  createRequire(import.meta.url).resolve('@nats-io/transport-node'),
);
const natsErrors = createRequire(fromTransport.resolve('@nats-io/nats-core'))(
  './errors.js',
) as Record<string, new (...args: never[]) => Error>;

test("the alerter's connection builds no error (and stack) per request, and a timeout still says so", async ({
  natsUrl,
  iso,
}) => {
  const logger = createLogger({ name: 'nats-client-test', level: 'silent' });
  const nc = await connectAlerterNats(natsUrl, logger);
  const made: string[] = [];
  const saved = { RequestError: natsErrors.RequestError!, TimeoutError: natsErrors.TimeoutError! };
  try {
    for (const [name, Base] of Object.entries(saved)) {
      natsErrors[name] = class extends Base {
        constructor(...args: never[]) {
          super(...args);
          made.push(name);
        }
      };
    }
    const subject = `${iso.names.authorityPrefix}.echo`;
    nc.subscribe(subject, { callback: (_err, m) => void m.respond(m.data) });
    for (let i = 0; i < 20; i++) {
      expect((await nc.request(subject, `r${i}`, { timeout: 1_000 })).string()).toBe(`r${i}`);
    }
    expect(made).toEqual([]);
    // A request nobody answers in time still fails as a timeout: its errors are made then.
    const silent = `${iso.names.authorityPrefix}.silent`;
    nc.subscribe(silent, { callback: () => undefined });
    await expect(nc.request(silent, '', { timeout: 50 })).rejects.toThrow(/timeout/i);
    expect(made).toContain('TimeoutError');
  } finally {
    Object.assign(natsErrors, saved);
    await nc.close();
  }
});
