import { defineConfig } from 'vitest/config';

const exclude = ['**/node_modules/**', '**/dist/**', '**/.tsbuild/**'];

/**
 * Two projects: `unit` (no infra) and `integration` (real NATS, Redis, ClickHouse, resolved
 * once per run by the testkit's global setup: *_URL, else Testcontainers, else local binaries).
 */
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['**/*.unit.test.ts'],
          exclude,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['**/*.int.test.ts', '**/*.e2e.test.ts'],
          exclude,
          globalSetup: ['./packages/testkit/dist/global-setup.js'],
          testTimeout: 120_000,
          hookTimeout: 60_000,
          // Integration files start servers and child processes; two at a time fit 2 cores.
          maxWorkers: 2,
          // vitest 4 refuses projects with different maxWorkers in one group: run this after unit.
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
