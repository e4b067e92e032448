import type { UpstreamConfig } from '@holdfast/config';
import { Ok } from '@holdfast/events';
import { expect, test } from 'vitest';
import { fallbackClaim, retryTake } from './capacity-move.js';
import type { CallDeps } from './deps.js';
import type { ForwardedCall } from './forward-call.js';

/** Deps whose authority answers `method` with `reply`, recording in `asked` what it was asked. */
function asking(method: string, reply: unknown, asked: unknown[]): CallDeps {
  const answer = (req: unknown) => {
    asked.push(req);
    return Promise.resolve(Ok(reply));
  };
  return {
    authority: { [method]: answer },
    options: { admitTimeoutMs: 1_000 },
  } as unknown as CallDeps;
}

/** What the edge asks the authority to move, for a hold with `ref`, after attempts on it. */
async function moveOf(ref: Record<string, unknown>, answered: string[], billed?: number) {
  const asked: unknown[] = [];
  const deps = asking('moveCapacity', { moved: true }, asked);
  const call = {
    admitted: true,
    hold: { ref },
    model: { id: 'gpt-4o-mini', upstream: 'default' },
    promptTokens: 100,
    maxOutput: 400,
  } as unknown as ForwardedCall;
  const spare = { id: 'spare', capacity: { tokensPerMinute: 10_000 } } as UpstreamConfig;
  const claim = fallbackClaim(deps, call, () => billed)!;
  expect(await claim(spare, new Set(answered))).toBe(true);
  expect(ref.upstream).toBe('spare'); // its close settles the fallback's take
  return asked;
}

const ref = { reservationId: 'r1', tenant: 'batch', upstream: 'default' };

test("a move names the hold's org (the team may have moved since its admission), as its closes do", async () => {
  const [req] = await moveOf({ ...ref, org: 'acme' }, []);
  expect(req).toEqual({
    reservationId: 'r1',
    tenant: 'batch',
    org: 'acme',
    model: 'gpt-4o-mini',
    from: 'default',
    to: 'spare',
    tokens: 500,
  });
  // A hold of a team with no org names none.
  const [plain] = await moveOf({ ...ref }, []);
  expect(plain).not.toHaveProperty('org');
});

test('a move keeps the request on the upstream the provider answered (429/5xx), not on one never reached', async () => {
  const [answered] = await moveOf({ ...ref }, ['default']);
  expect(answered).toMatchObject({ from: 'default', fromAnswered: true });
  const [unreached] = await moveOf({ ...ref }, []);
  expect(unreached).not.toHaveProperty('fromAnswered');
  // Billed attempts (the provider read them, failed inside its stream) are settled instead.
  const [billed] = await moveOf({ ...ref }, ['default'], 42);
  expect(billed).toMatchObject({ from: 'default', fromUsedTokens: 42 });
  expect(billed).not.toHaveProperty('fromAnswered');
});

test("a retry names the hold's org (the team may have moved since its admission), as its moves do", async () => {
  const asked: unknown[] = [];
  const deps = asking('retryCapacity', { taken: true }, asked);
  const call = {
    admitted: true,
    hold: { ref: { ...ref, org: 'acme' } },
    model: { id: 'gpt-4o-mini', upstream: 'default' },
  } as unknown as ForwardedCall;
  const retried = retryTake(deps, call)!;
  expect(await retried({ id: 'default' } as UpstreamConfig)).toBe(true);
  expect(asked).toEqual([
    {
      reservationId: 'r1',
      tenant: 'batch',
      org: 'acme',
      model: 'gpt-4o-mini',
      upstream: 'default',
    },
  ]);
});
