import type { TestProject } from 'vitest/node';
import { resolveInfra, type InfraUrls } from './resolve-infra.js';

declare module 'vitest' {
  export interface ProvidedContext {
    infra: InfraUrls;
  }
}

/**
 * vitest globalSetup: resolves NATS, Redis and ClickHouse once per run.
 * @public vitest calls it by name from the built file (vitest.config.ts), which knip cannot follow.
 */
export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { urls, stop } = await resolveInfra();
  for (const [name, entry] of Object.entries(urls)) {
    // eslint-disable-next-line no-console -- test-run banner
    console.log(`[testkit] ${name}: ${'url' in entry ? entry.url : entry.missing}`);
  }
  project.provide('infra', urls);
  return stop;
}
