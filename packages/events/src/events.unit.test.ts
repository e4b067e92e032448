import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseEvent } from './events.js';
import { TenantId } from './ids.js';

const settled = {
  id: randomUUID(),
  schemaVersion: 1,
  time: new Date().toISOString(),
  tenant: 'batch-summariser',
  org: 'batch-summariser',
  type: 'reservation.settled',
  reservationId: randomUUID(),
  keyId: 'batch-1',
  useCase: 'UC-112',
  model: 'gpt-4o-mini',
  mode: 'reserve',
  heldTokens: 1394,
  heldMicroUsd: 670,
  promptTokens: 370,
  completionTokens: 1024,
  cachedPromptTokens: 0,
  billedTokens: 1394,
  costMicroUsd: 670,
  chargedTokens: 1394,
  chargedMicroUsd: 670,
  outcome: 'completed',
  durationMs: 1200,
  windows: [
    {
      tenant: 'batch-summariser',
      budget: 'month-tokens',
      window: 'month',
      unit: 'tokens',
      limit: 40000,
      used: 1394,
      held: 0,
      enforce: true,
    },
  ],
};

describe('parseEvent', () => {
  it('accepts a valid event from JSON text and bytes', () => {
    expect(parseEvent(JSON.stringify(settled))).toMatchObject({ ok: true });
    expect(parseEvent(new TextEncoder().encode(JSON.stringify(settled)))).toMatchObject({
      ok: true,
    });
  });

  it('rejects malformed JSON, unknown types and future versions without throwing', () => {
    expect(parseEvent('{nope')).toEqual({ ok: false, error: 'event is not valid JSON' });
    expect(parseEvent('[]')).toMatchObject({ ok: false });
    expect(
      parseEvent(JSON.stringify({ ...settled, type: 'reservation.teleported' })),
    ).toMatchObject({ ok: false });
    expect(parseEvent(JSON.stringify({ ...settled, schemaVersion: 2 }))).toEqual({
      ok: false,
      error: 'unsupported schemaVersion 2',
    });
  });

  it('rejects negative amounts and a tenant that could break a subject', () => {
    expect(parseEvent(JSON.stringify({ ...settled, billedTokens: -1 }))).toMatchObject({
      ok: false,
    });
    expect(parseEvent(JSON.stringify({ ...settled, tenant: 'a.b' }))).toMatchObject({ ok: false });
  });
});

describe('TenantId', () => {
  it.each(['a.b', 'a b', 'a*', 'a>', 'ünï', 'A', '', '-a', 'x'.repeat(65)])('rejects %j', (id) => {
    expect(TenantId.safeParse(id).success).toBe(false);
  });
  it.each(['batch-summariser', 'a', 'team_1', 'x'.repeat(64)])('accepts %j', (id) => {
    expect(TenantId.safeParse(id).success).toBe(true);
  });
});
