import { natsNames } from '@holdfast/config';
import { Usage, type CloseReply, type ReleaseRequest, type SettleRequest } from '@holdfast/events';
import { createLogger, Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import { Registry } from 'prom-client';
import { expect, test } from 'vitest';
import { EdgeMetrics } from '../metrics.js';
import { Holds, type HoldsOptions } from './holds.js';

const SETTLED: CloseReply = {
  status: 'settled',
  billedTokens: 150,
  costMicroUsd: 45,
  windows: [],
  overrunTokens: 0,
  overrunMicroUsd: 0,
};

/**
 * Holds over an authority that answers each settle from `replies` in turn (the last one
 * again once they run out) and a closes stream that takes what `publish` says.
 */
function holdsOver(
  replies:
    Array<Result<CloseReply, RpcError>> | ((req: SettleRequest) => Result<CloseReply, RpcError>),
  publish: HoldsOptions['js']['publish'] = () => Promise.reject(new Error('no JetStream')),
  backoffMs = 1,
  release: (req: ReleaseRequest) => Result<CloseReply, RpcError> = () => Ok(SETTLED),
) {
  const metrics = new EdgeMetrics(new Registry());
  let settles = 0;
  const sent: SettleRequest[] = [];
  const released: ReleaseRequest[] = [];
  const holds = new Holds({
    authority: {
      settle: (req) => {
        sent.push(req);
        const i = Math.min(settles++, replies.length - 1);
        return Promise.resolve(typeof replies === 'function' ? replies(req) : replies[i]!);
      },
      release: (req) => {
        released.push(req);
        return Promise.resolve(release(req));
      },
    },
    js: { publish },
    names: natsNames({
      HOLDFAST_EVENTS_STREAM: 'UNIT',
      HOLDFAST_EVENTS_PREFIX: 'unit.events',
      HOLDFAST_AUTHORITY_PREFIX: 'unit.authority',
    }),
    logger: createLogger({ name: 'unit', level: 'silent' }),
    metrics,
    timeoutMs: 1_000,
    attempts: 3,
    backoffMs,
  });
  const pending = async () => (await metrics.closesPending.get()).values[0]?.value;
  const settle = (reservationId = 'res-1', responseId?: string) =>
    holds.close(
      { reservationId, tenant: 'team', org: 'team' },
      {
        how: 'settle',
        usage: Usage.parse({ promptTokens: 100, completionTokens: 50 }),
        outcome: 'completed',
        ...(responseId ? { responseId } : {}),
      },
    );
  return { holds, metrics, pending, settle, settles: () => settles, sent, released };
}

const away = () =>
  Err(new RpcError({ code: 'no_responders', message: 'no authority', retry: true }));

test('a settle the authority has not taken yet is pending until it does', async () => {
  const h = holdsOver([away(), away(), Ok(SETTLED)]);
  expect(await h.pending()).toBe(0);
  const closing = h.settle();
  // Retrying: the ledger lacks this call (its hold may expire meanwhile, billed at worst case).
  expect(await h.pending()).toBe(1);
  await closing;
  expect(h.settles()).toBe(3);
  expect(await h.pending()).toBe(0);
});

test('a settle handed to the closes stream is pending until JetStream has it', async () => {
  let take: () => void = () => undefined;
  const published = new Promise<void>((resolve) => (take = resolve));
  let publishes = 0;
  const h = holdsOver([away()], async () => {
    publishes++;
    await published;
    return { stream: 'UNIT_CLOSES', seq: 1, duplicate: false, domain: '' };
  });
  const closing = h.settle();
  // Every attempt failed: the close is being handed over, still owed.
  await expect.poll(() => publishes).toBe(1);
  expect(await h.pending()).toBe(1);
  take();
  await closing;
  // The authority applies it from the stream when it is back: no longer the edge's to deliver.
  expect(await h.pending()).toBe(0);
});

test('closes waiting out a backoff step go at once when an authority starts, all in one turn', async () => {
  const noJetStream = () => Promise.reject(new Error('no JetStream'));
  const h = holdsOver([away(), away(), away(), Ok(SETTLED)], noJetStream, 60_000);
  const closing = ['res-1', 'res-2', 'res-3'].map((id) => h.settle(id));
  const endOfTurn = () =>
    new Promise<number>((resolve) => setImmediate(() => resolve(h.settles())));
  expect(await endOfTurn()).toBe(3); // each refused once, now waiting 60 s
  h.holds.wake();
  // Asked before the turn ends, so the request batcher sends the three as one message.
  expect(await endOfTurn()).toBe(6);
  await Promise.all(closing);
  expect(await h.pending()).toBe(0);
});

test('a settle an older authority refuses for its response id goes again without it: the usage is not lost', async () => {
  const h = holdsOver((req) =>
    'responseId' in req
      ? Err(new RpcError({ code: 'invalid_request', message: 'unrecognized key: responseId' }))
      : Ok(SETTLED),
  );
  await h.settle('res-1', 'resp_1');
  expect(h.sent).toEqual([
    expect.objectContaining({ reservationId: 'res-1', responseId: 'resp_1' }),
    expect.not.objectContaining({ responseId: expect.anything() }),
  ]);
  expect((await h.metrics.holdCloseFailures.get()).values).toEqual([]);
});

test('a release an older authority refuses for its answeredRequests goes again without it: the hold is not left held', async () => {
  const h = holdsOver([Ok(SETTLED)], undefined, 1, (req) =>
    'answeredRequests' in req
      ? Err(new RpcError({ code: 'invalid_request', message: 'unrecognized key' }))
      : Ok({ ...SETTLED, status: 'released' }),
  );
  await h.holds.close(
    { reservationId: 'res-1', tenant: 'team', org: 'team', upstream: 'default' },
    { how: 'release', reason: 'upstream_error', answeredRequests: 3 },
  );
  expect(h.released).toEqual([
    expect.objectContaining({ reservationId: 'res-1', answeredRequests: 3 }),
    expect.not.objectContaining({ answeredRequests: expect.anything() }),
  ]);
  expect((await h.metrics.holdCloseFailures.get()).values).toEqual([]);
});

test("a team's next call naming what its call stored waits for that call's close however slow the authority is, up to the close's own attempts", async () => {
  // A loaded authority answers the settle after 1.5 s, past the edge's 1 s admit timeout: the
  // next step of the team's loop (its sealed reasoning, its previous response) waited 1 s, went
  // to the authority before the owner was recorded and was refused as not the team's.
  const metrics = new EdgeMetrics(new Registry());
  const holds = new Holds({
    authority: {
      settle: () => new Promise((resolve) => setTimeout(() => resolve(Ok(SETTLED)), 1_500)),
      release: () => Promise.resolve(Ok(SETTLED)),
    },
    js: { publish: () => Promise.reject(new Error('no JetStream')) },
    names: natsNames({
      HOLDFAST_EVENTS_STREAM: 'UNIT',
      HOLDFAST_EVENTS_PREFIX: 'unit.events',
      HOLDFAST_AUTHORITY_PREFIX: 'unit.authority',
    }),
    logger: createLogger({ name: 'unit', level: 'silent' }),
    metrics,
    timeoutMs: 2_000,
    attempts: 3,
  });
  const ref = { reservationId: 'res-slow', tenant: 'team', org: 'team' };
  holds.storing(ref, 'ec_sealed');
  let answered = false;
  const closing = holds
    .close(ref, {
      how: 'settle',
      usage: Usage.parse({ promptTokens: 100, completionTokens: 50 }),
      outcome: 'completed',
      itemIds: ['ec_sealed'],
    })
    .then(() => (answered = true));
  const started = Date.now();
  await holds.ownersRecorded('team', { itemIds: ['ec_sealed'] });
  expect(answered).toBe(true);
  expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
  // Another team's call naming it, or an id no call here closes, does not wait.
  const other = Date.now();
  await holds.ownersRecorded('intruder', { previousResponseId: 'resp_x', itemIds: ['ec_sealed'] });
  expect(Date.now() - other).toBeLessThan(100);
  await closing;
});
