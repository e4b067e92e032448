import { z } from 'zod';

/** What one call is: a POST to a target, the same bytes every time. */
export const Target = z.object({
  origin: z.string(),
  path: z.string(),
  headers: z.record(z.string(), z.string()),
  body: z.string(),
});
export type Target = z.infer<typeof Target>;

/** Closed loop: `connections` callers back to back. Open loop: `rate` calls a second. */
export const Load = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('closed'), connections: z.int().min(1) }),
  z.object({ mode: z.literal('open'), rate: z.number().positive() }),
]);
export type Load = z.infer<typeof Load>;

/** Parent -> load generator. */
export const RunRequest = z.object({
  id: z.int(),
  target: Target,
  load: Load,
  seconds: z.number().positive(),
});
export type RunRequest = z.infer<typeof RunRequest>;

/** What a phase measured on the client side; latencies in ms, from when a call was sent. */
export const LoadResult = z.object({
  calls: z.int(),
  errors: z.int(),
  /** Up to 5 distinct error messages (status and the start of the body). */
  errorSamples: z.array(z.string()),
  seconds: z.number(),
  perSecond: z.number(),
  p50: z.number(),
  p90: z.number(),
  p99: z.number(),
  max: z.number(),
  mean: z.number(),
  /** Open loop: how late calls left against their schedule (p99, ms); 0 for a closed loop. */
  sendLagP99: z.number(),
});
export type LoadResult = z.infer<typeof LoadResult>;

/** Load generator -> parent. */
export const RunReply = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('ready') }),
  z.object({ kind: z.literal('result'), id: z.int(), result: LoadResult }),
  z.object({ kind: z.literal('failed'), id: z.int(), message: z.string() }),
]);
export type RunReply = z.infer<typeof RunReply>;
