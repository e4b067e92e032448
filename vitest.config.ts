import { defineConfig } from 'vitest/config';

const exclude = ['**/node_modules/**', '**/dist/**', '**/.tsbuild/**'];

/**
 * Files that time answers under a kill -9 while hundreds of calls are in flight (the Redis
 * Cluster chaos test asserts that orgs on live masters see no 1 s timeouts): they run after the
 * rest, one at a time, so another file's load on 2 cores cannot starve them. Beside another
 * file they timed out calls of every org at once, a stall of the box, not of the cluster.
 */
const ALONE = ['services/budget-authority/test/cluster.int.test.ts'];

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
          // A unit test's first call pays cold costs of its file (a tokenizer's vocabulary, ajv
          // compiling zod's JSON Schema, a worker thread, a fastify app): 0.5-2 s alone, past
          // vitest's 5 s default when the box runs integration files beside it (load 13-21 seen;
          // family.unit's worker test took 5,022 ms at nice 19 on a load of 10). The bound is
          // for a hung test, not a speed check: no unit test asserts its own duration this way.
          testTimeout: 30_000,
          hookTimeout: 60_000,
          // Projects with different maxWorkers must run in different groups (vitest 4).
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'integration',
          include: ['**/*.int.test.ts', '**/*.e2e.test.ts'],
          exclude: [...exclude, ...ALONE],
          globalSetup: ['./packages/testkit/dist/global-setup.js'],
          testTimeout: 120_000,
          hookTimeout: 60_000,
          // Integration files start servers and child processes, and much of their time is
          // waiting (elections, outages, timers): three at a time on 2 cores took the suite from
          // 1,376 s to 1,085 s in CI's conditions (2026-12-07), every file passing; the files that
          // time a kill -9 under load still run alone (ALONE).
          maxWorkers: 3,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          name: 'integration-alone',
          include: ALONE,
          exclude,
          globalSetup: ['./packages/testkit/dist/global-setup.js'],
          testTimeout: 120_000,
          hookTimeout: 60_000,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
