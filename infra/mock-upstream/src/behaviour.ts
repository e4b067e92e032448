import { z } from 'zod';

/**
 * How many tokens a reply has before the `max_tokens` cap: a fixed number, a fraction of the
 * cap, or uniform between min and max (seeded by the config seed and the prompt, so the same
 * request always gets the same length).
 */
export const CompletionLength = z.discriminatedUnion('mode', [
  z.strictObject({ mode: z.literal('fixed'), tokens: z.int().min(0).max(1_000_000) }),
  z.strictObject({ mode: z.literal('fraction'), fraction: z.number().min(0).max(1) }),
  z
    .strictObject({
      mode: z.literal('uniform'),
      min: z.int().min(0).max(1_000_000),
      max: z.int().min(0).max(1_000_000),
    })
    .refine((u) => u.min <= u.max, { message: 'min must not exceed max' }),
]);
export type CompletionLength = z.infer<typeof CompletionLength>;

/** Runtime behaviour: set at startup, changed by `PUT /_mock/config`, restored by reset. */
export const Behaviour = z.strictObject({
  /** Before the first content token (streaming) or before the whole response. */
  firstTokenLatencyMs: z.int().min(0).max(600_000),
  /** Between two tokens (a non-streaming reply waits for all of them). */
  tokenDelayMs: z.number().min(0).max(60_000),
  completion: CompletionLength,
  /** The cap when a request sets neither max_tokens nor max_completion_tokens. */
  maxOutputTokens: z.int().min(1).max(1_000_000),
  /** Mixed into every generated text and length. */
  seed: z.int(),
  /** What `GET /v1/models` lists. Any model name is served. */
  models: z.array(z.string().min(1)).min(1),
  embeddingDimensions: z.int().min(1).max(8_192),
});
export type Behaviour = z.infer<typeof Behaviour>;

export const BehaviourPatch = Behaviour.partial();
export type BehaviourPatch = z.infer<typeof BehaviourPatch>;

export const DEFAULT_BEHAVIOUR: Behaviour = {
  firstTokenLatencyMs: 0,
  tokenDelayMs: 0,
  completion: { mode: 'fixed', tokens: 50 },
  maxOutputTokens: 16_384,
  seed: 0,
  models: ['gpt-4o-mini', 'gpt-4o', 'gpt-4', 'gpt-3.5-turbo', 'text-embedding-3-small'],
  embeddingDimensions: 1536,
};

/** `fixed:64`, `fraction:0.5` or `uniform:16-512`, the env/CLI form of a CompletionLength. */
export function parseCompletionSpec(spec: string): CompletionLength | undefined {
  const [mode, value = ''] = spec.split(':', 2);
  const range = /^(\d+)-(\d+)$/.exec(value);
  const candidate =
    mode === 'fixed'
      ? { mode, tokens: Number(value) }
      : mode === 'fraction'
        ? { mode, fraction: Number(value) }
        : mode === 'uniform' && range
          ? { mode, min: Number(range[1]), max: Number(range[2]) }
          : undefined;
  const parsed = CompletionLength.safeParse(candidate);
  return parsed.success ? parsed.data : undefined;
}

export const FAILURES = ['500', '429', 'hang', 'drop'] as const;
export type FailureKind = (typeof FAILURES)[number];

export interface Failure {
  kind: FailureKind;
  /** 429: seconds in Retry-After. */
  retryAfterS: number;
  /** drop/hang on a stream: content tokens sent before the socket is destroyed or stalls. */
  afterTokens: number;
}

/** Body of `POST /_mock/fail-next`: the next `count` model requests fail this way. */
export const FailNext = z.strictObject({
  status: z.union([z.literal(500), z.literal(429), z.enum(FAILURES)]),
  count: z.int().min(1).max(1_000_000).default(1),
  retryAfter: z.number().min(0).max(3_600).default(1),
  afterTokens: z.int().min(0).max(1_000_000).default(0),
});
export type FailNextInput = z.input<typeof FailNext>;

export function toFailure(spec: z.infer<typeof FailNext>): Failure {
  return {
    kind: String(spec.status) as FailureKind,
    retryAfterS: spec.retryAfter,
    afterTokens: spec.afterTokens,
  };
}
