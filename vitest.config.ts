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
          // Projects with different maxWorkers must run in different groups (vitest 4).
          sequence: { groupOrder: 0 },
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
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
