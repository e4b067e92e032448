import { accessSync, constants } from 'node:fs';
import { basename } from 'node:path';
import { expect, test } from 'vitest';
import { serverBinary } from './resolve-infra.js';

test("serverBinary gives each piece of infra's server on this machine, by any of its names", () => {
  for (const [name, names] of [
    ['nats', ['nats-server']],
    ['redis', ['redis-server']],
    ['clickhouse', ['clickhouse-server', 'clickhouse']],
  ] as const) {
    const bin = serverBinary(name);
    expect(names).toContain(basename(bin));
    expect(() => accessSync(bin, constants.X_OK)).not.toThrow();
  }
});
