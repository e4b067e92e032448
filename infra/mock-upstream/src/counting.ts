import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { CapacityLimiter } from './capacity.js';
import { sendError, type Surface } from './surface.js';

/**
 * The counting endpoints (`POST /v1/messages/count_tokens`, `POST /v1/responses/input_tokens`)
 * as a provider runs them: a latency of their own, and a requests-per-minute limit of their
 * own apart from the model's (Anthropic rate-limits count_tokens separately from Messages).
 */
export const Counting = z.strictObject({
  latencyMs: z.int().min(0).max(600_000).default(0),
  requestsPerMinute: z.int().min(1).nullable().default(null),
  /** Every count answered with this error status (401, 403, 408, 500, ...); null: counted. */
  failStatus: z.int().min(400).max(599).nullable().default(null),
});
export type Counting = z.infer<typeof Counting>;

/** What the counting endpoints saw: requests open now, the most open at once, 429s sent. */
export interface CountingStats {
  inFlight: number;
  peakInFlight: number;
  rejected: number;
}

/** The counting endpoints' gate: their limit over a sliding 60 s, and what is open. */
export class CountGate {
  readonly #limit = new CapacityLimiter();
  #config: Counting = { latencyMs: 0, requestsPerMinute: null, failStatus: null };
  #stats: CountingStats = { inFlight: 0, peakInFlight: 0, rejected: 0 };

  configure(config: Counting): void {
    this.#config = config;
    const { requestsPerMinute } = config;
    this.#limit.configure({ tokensPerMinute: null, requestsPerMinute, count: 'requested' });
  }

  reset(): void {
    this.#limit.reset();
    this.#stats = { inFlight: this.#stats.inFlight, peakInFlight: 0, rejected: 0 };
  }

  snapshot(): CountingStats {
    return { ...this.#stats };
  }

  /**
   * Runs a count: refused with the surface's 429 (and a Retry-After) past the limit, else
   * answered after the latency. Returns what `count` returned, or the reply sent.
   */
  async run<T>(reply: FastifyReply, surface: Surface, count: () => Promise<T>): Promise<T> {
    const admitted = this.#limit.admit(0);
    if (!admitted.ok) {
      this.#stats.rejected += 1;
      const ms = admitted.error.retryAfterMs;
      const message = `Rate limit reached for token counting (mock account) on requests per min (RPM): Limit ${this.#config.requestsPerMinute}. Please try again in ${(ms / 1_000).toFixed(3)}s.`;
      reply.header('retry-after', String(Math.max(1, Math.ceil(ms / 1_000))));
      return sendError(reply, surface, 'rate_limit', message) as T;
    }
    const { failStatus } = this.#config;
    if (failStatus !== null) {
      const message = `mock counting fails with ${failStatus}`;
      return reply.code(failStatus).send(surface.error('server', message).body) as T;
    }
    const s = this.#stats;
    s.inFlight += 1;
    s.peakInFlight = Math.max(s.peakInFlight, s.inFlight);
    try {
      if (this.#config.latencyMs > 0) await sleep(this.#config.latencyMs);
      return await count();
    } finally {
      s.inFlight -= 1;
    }
  }
}
