import { randomUUID } from 'node:crypto';
import { HoldfastEvent, type EventOf, type WindowState } from '@holdfast/events';

/** The bench config's call (bench-config.yaml): team bench-team under org bench-org. */
const TEAM = 'bench-team';
const ORG = 'bench-org';
const PROMPT = 9;
const COMPLETION = 16;
const MAX_TOKENS = 512;
/** gpt-4o-mini's prices in the bench config, micro-USD per token (rounded up). */
const INPUT_MICRO_USD = 0.15;
const OUTPUT_MICRO_USD = 0.6;

type Created = EventOf<'reservation.created'>;
type Settled = EventOf<'reservation.settled'>;

/** The three windows an admission checks: team month tokens and day USD, org month USD. */
function windows(usedTokens: number, usedMicroUsd: number, held: number, heldUsd: number) {
  const w = (
    tenant: string,
    budget: WindowState['budget'],
    limit: number,
    used: number,
    h: number,
  ): WindowState => ({
    tenant,
    budget,
    window: budget.startsWith('month') ? 'month' : 'day',
    unit: budget.endsWith('usd') ? 'usd' : 'tokens',
    limit,
    used,
    held: h,
    enforce: true,
  });
  return [
    w(TEAM, 'month-tokens', 1_000_000_000_000, usedTokens, held),
    w(TEAM, 'day-usd', 100_000_000 * 1_000_000, usedMicroUsd, heldUsd),
    w(ORG, 'month-usd', 1_000_000_000 * 1_000_000, usedMicroUsd, heldUsd),
  ];
}

/**
 * The events the authority publishes for the calls of `pnpm bench:stack`: per call a
 * `reservation.created` then a `reservation.settled`, with the org's and the team's three
 * windows, their `used` growing call after call. Each event is checked by the schema.
 */
export class StackCalls {
  #usedTokens = 0;
  #usedMicroUsd = 0;

  /** One call's two events, at `atMs`. */
  next(atMs: number): [Created, Settled] {
    const held = PROMPT + MAX_TOKENS;
    const heldUsd = Math.ceil(PROMPT * INPUT_MICRO_USD + MAX_TOKENS * OUTPUT_MICRO_USD);
    const billed = PROMPT + COMPLETION;
    const cost = Math.ceil(PROMPT * INPUT_MICRO_USD + COMPLETION * OUTPUT_MICRO_USD);
    const call = {
      schemaVersion: 1,
      tenant: TEAM,
      org: ORG,
      reservationId: randomUUID(),
      keyId: 'bench-1',
      useCase: 'UC-BENCH',
      model: 'gpt-4o-mini',
      mode: 'reserve',
      api: 'chat',
      heldTokens: held,
      heldMicroUsd: heldUsd,
      promptTokens: PROMPT,
    };
    const created = HoldfastEvent.parse({
      ...call,
      id: randomUUID(),
      type: 'reservation.created',
      time: new Date(atMs).toISOString(),
      maxTokens: MAX_TOKENS,
      requestedMaxTokens: MAX_TOKENS,
      chargedTokens: 0,
      chargedMicroUsd: 0,
      expiresAt: new Date(atMs + 120_000).toISOString(),
      upstream: 'default',
      windows: windows(this.#usedTokens, this.#usedMicroUsd, held, heldUsd),
    }) as Created;
    this.#usedTokens += billed;
    this.#usedMicroUsd += cost;
    const settled = HoldfastEvent.parse({
      ...call,
      id: randomUUID(),
      type: 'reservation.settled',
      time: new Date(atMs + 2).toISOString(),
      completionTokens: COMPLETION,
      cachedPromptTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
      reasoningTokens: 0,
      billedTokens: billed,
      costMicroUsd: cost,
      chargedTokens: billed,
      chargedMicroUsd: cost,
      outcome: 'completed',
      durationMs: 2,
      windows: windows(this.#usedTokens, this.#usedMicroUsd, 0, 0),
    }) as Settled;
    return [created, settled];
  }
}
