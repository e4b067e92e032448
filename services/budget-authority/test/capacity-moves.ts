import { expect } from 'vitest';
import type { TestAuthority } from '../src/testing.js';
import { admissionOf, miniCall } from './harness.js';

/** A support-bot call of 500 tokens (100 prompt, 400 out) admitted on the default upstream. */
export async function admittedOnDefault(h: TestAuthority): Promise<string> {
  const call = miniCall(100, 400);
  expect(admissionOf(await h.client.admit(call)).upstream).toBe('default');
  return call.reservationId;
}

/** The tokens each declared upstream's capacity counts in the last minute (the status page). */
export async function capacityTokens(h: TestAuthority): Promise<Record<string, number>> {
  const u = await h.client.usage({});
  if (!u.ok) throw new Error(u.error.message);
  return Object.fromEntries(u.value.capacity.map((c) => [c.upstream, c.tokens]));
}

/** `config` with support-bot under `org` (acme or globex: two roots, two slots). */
export function inOrg<C extends { tenants: { id: string }[] }>(config: C, org: string) {
  return {
    ...config,
    tenants: [
      { id: 'acme', budgets: [{ window: 'day', limit: 1_000_000 }] },
      { id: 'globex', budgets: [{ window: 'day', limit: 1_000_000 }] },
      ...config.tenants.filter((t) => t.id === 'support-bot').map((t) => ({ ...t, parent: org })),
    ],
  };
}
