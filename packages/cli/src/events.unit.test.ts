import { describe, expect, it } from 'vitest';
import type { LocalStack } from './context.js';
import { eventLine } from './events-format.js';
import { eventsPlan, sinceTime } from './events-plan.js';

const NOW = Date.parse('2026-12-01T12:00:00.000Z');
const noStack: LocalStack = { dir: '/s', state: undefined, adminToken: undefined };
const plan = (o: Parameters<typeof eventsPlan>[0], env: NodeJS.ProcessEnv = {}, stack = noStack) =>
  eventsPlan(o, env, stack, NOW);

describe('holdfast events: what it asks the stream for', () => {
  it('every event, new ones only, on the default stream and local NATS', () => {
    expect(plan({})).toMatchObject({
      servers: ['nats://127.0.0.1:4222'],
      stream: 'HOLDFAST_EVENTS',
      subject: 'holdfast.events.*.>',
      start: { deliver_policy: 'new' },
      follow: true,
    });
    expect(plan({ 'no-follow': true }).start).toEqual({ deliver_policy: 'all' });
  });

  it('one tenant and one type (or a family) filter on the server', () => {
    expect(plan({ tenant: 'support-bot', type: ['reservation.settled'] }).subject).toBe(
      'holdfast.events.support-bot.reservation.settled',
    );
    expect(plan({ type: ['reservation.*'] }).subject).toBe('holdfast.events.*.reservation.*');
    const two = plan({ tenant: 'support-bot', type: ['admission.refused,tenant.*'] });
    expect(two.subject).toBe('holdfast.events.support-bot.>');
    expect(
      ['admission.refused', 'tenant.suspended', 'reservation.created'].map(two.types!),
    ).toEqual([true, true, false]);
  });

  it('starts at a time (an age or an ISO time) or a sequence', () => {
    expect(plan({ since: '10m' }).start).toEqual({
      deliver_policy: 'by_start_time',
      opt_start_time: '2026-12-01T11:50:00.000Z',
    });
    expect(sinceTime('2026-11-30T10:00:00Z', NOW)).toBe('2026-11-30T10:00:00.000Z');
    expect(plan({ seq: '42' }).start).toEqual({
      deliver_policy: 'by_start_sequence',
      opt_start_seq: 42,
    });
  });

  it('the running stack gives NATS and the names; NATS_URL and --nats win', () => {
    const stack = {
      ...noStack,
      state: {
        urls: { nats: 'nats://127.0.0.1:14222' },
        natsNames: { HOLDFAST_EVENTS_STREAM: 'X_EVENTS', HOLDFAST_EVENTS_PREFIX: 'x.events' },
      },
    } as unknown as LocalStack;
    expect(plan({}, {}, stack)).toMatchObject({
      servers: ['nats://127.0.0.1:14222'],
      stream: 'X_EVENTS',
      subject: 'x.events.*.>',
    });
    expect(plan({}, { NATS_URL: 'nats://n:1,nats://o:1' }, stack).servers).toEqual([
      'nats://n:1',
      'nats://o:1',
    ]);
    expect(plan({ nats: 'nats://m:2' }, { NATS_URL: 'nats://n:1' }, stack).servers).toEqual([
      'nats://m:2',
    ]);
    expect(() => plan({ nats: 'http://m:2' }, {}, stack)).toThrow('--nats: must be one or more');
  });

  it('refuses what it cannot mean, and says what was probably meant', () => {
    expect(() => plan({ type: ['reservation.setled'] })).toThrow(
      '--type reservation.setled: unknown event type (did you mean reservation.settled?)',
    );
    expect(() => plan({ tenant: 'Support Bot' })).toThrow('--tenant Support Bot: not a tenant id');
    expect(() => plan({ since: 'yesterday' })).toThrow('--since yesterday: give a time');
    expect(() => plan({ since: '1h', seq: '3' })).toThrow('give one of --since, --seq and --all');
    expect(() => plan({ seq: '0' })).toThrow('--seq must be a stream sequence');
  });
});

describe('holdfast events: one readable line per event', () => {
  const base = {
    id: 'e1',
    time: '2026-12-01T12:00:01.123Z',
    tenant: 'support-bot',
    org: 'acme',
    reservationId: '1a2b3c4d-0000-4000-8000-000000000000',
    keyId: 'support-1',
    useCase: 'UC-101',
    model: 'gpt-4o-mini',
  };
  const windows = [
    {
      tenant: 'support-bot',
      budget: 'month-tokens',
      unit: 'tokens',
      used: 1_234,
      held: 512,
      limit: 60_000,
    },
    { tenant: 'acme', budget: 'day-usd', unit: 'usd', used: 155, held: 0, limit: 2_500_000 },
  ];

  it('a settlement: what was billed, in tokens and exact dollars, and the windows after', () => {
    const line = eventLine(42, {
      ...base,
      type: 'reservation.settled',
      billedTokens: 21,
      promptTokens: 9,
      completionTokens: 12,
      costMicroUsd: 9,
      outcome: 'completed',
      durationMs: 35,
      windows,
    });
    expect(line).toBe(
      '2026-12-01T12:00:01.123Z #42 support-bot reservation.settled res 1a2b3c4d key support-1 UC-101 gpt-4o-mini: billed 21 tokens (9 prompt + 12 completion), $0.000009, completed in 35 ms  [month-tokens 1,234 +512 held of 60,000; acme/day-usd $0.000155 of $2.50]',
    );
  });

  it('a move names the fallback, the upstream it left and what was billed there', () => {
    const moved = {
      ...base,
      type: 'reservation.moved',
      upstream: 'backup',
      fromUpstream: 'default',
      tokens: 1_500,
      fromUsedTokens: 120,
    };
    expect(eventLine(9, moved)).toContain(
      'reservation.moved res 1a2b3c4d gpt-4o-mini: moved to upstream backup from default (1,500 tokens taken there, 120 billed on default)',
    );
  });

  it('a retry names the upstream it took a request of', () => {
    const retried = { ...base, type: 'reservation.retried', upstream: 'default' };
    expect(eventLine(9, retried)).toContain(
      'reservation.retried res 1a2b3c4d gpt-4o-mini: a retry took a request of upstream default',
    );
  });

  it('a refusal carries its message; an unknown type its plain fields', () => {
    expect(
      eventLine(7, {
        ...base,
        type: 'admission.refused',
        code: 'budget_exceeded',
        message: 'No room.',
        shadow: false,
      }),
    ).toContain('admission.refused budget_exceeded: No room.');
    expect(
      eventLine(8, { ...base, type: 'reservation.overrun', excessTokens: 30, windows: [] }),
    ).toContain(
      'reservation.overrun reservationId=1a2b3c4d-0000-4000-8000-000000000000 keyId=support-1 useCase=UC-101 model=gpt-4o-mini excessTokens=30',
    );
  });
});
