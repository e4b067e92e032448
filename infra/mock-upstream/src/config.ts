import { env, parseEnv } from '@holdfast/config';
import { z } from 'zod';
import { DEFAULT_BEHAVIOUR, parseCompletionSpec } from './behaviour.js';
import type { MockUpstreamOptions } from './server.js';

const EnvSchema = z.object({
  /** HTTP port of the mock (the OpenAI routes, /_mock and /healthz, /readyz, /metrics). */
  MOCK_UPSTREAM_PORT: env.port(8089),
  MOCK_UPSTREAM_HOST: env.string('0.0.0.0'),
  /** When set (non-empty), /v1 requests need `Authorization: Bearer <it>`. */
  MOCK_UPSTREAM_API_KEY: z.string().optional(),
  /** Delay before the first content token. */
  MOCK_UPSTREAM_FIRST_TOKEN_MS: env.int(DEFAULT_BEHAVIOUR.firstTokenLatencyMs, 0, 600_000),
  /** Delay between tokens. */
  MOCK_UPSTREAM_TOKEN_DELAY_MS: z.coerce.number().min(0).max(60_000).default(0),
  /** Reply length before the max_tokens cap: `fixed:N`, `fraction:F` or `uniform:MIN-MAX`. */
  MOCK_UPSTREAM_COMPLETION: z
    .string()
    .default('fixed:50')
    .transform((spec, ctx) => {
      const parsed = parseCompletionSpec(spec);
      if (!parsed)
        ctx.addIssue({ code: 'custom', message: 'use fixed:N, fraction:F or uniform:MIN-MAX' });
      return parsed ?? DEFAULT_BEHAVIOUR.completion;
    }),
  /** The cap when a request sets no max_tokens. */
  MOCK_UPSTREAM_MAX_OUTPUT_TOKENS: env.int(DEFAULT_BEHAVIOUR.maxOutputTokens, 1),
  /** Seed mixed into generated text and lengths. */
  MOCK_UPSTREAM_SEED: env.int(0),
  /** Comma-separated model ids for GET /v1/models. */
  MOCK_UPSTREAM_MODELS: z.string().default(DEFAULT_BEHAVIOUR.models.join(',')),
  /** The account's tokens per minute (sliding 60 s), answered with 429 past it; 0: none. */
  MOCK_UPSTREAM_TPM: env.int(0),
  /** The account's requests per minute; 0: none. */
  MOCK_UPSTREAM_RPM: env.int(0),
  LOG_LEVEL: env.logLevel(),
});

export interface MockUpstreamConfig {
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  options: MockUpstreamOptions;
}

export function loadConfig(source: NodeJS.ProcessEnv = process.env): MockUpstreamConfig {
  const e = parseEnv(EnvSchema, source);
  return {
    logLevel: e.LOG_LEVEL,
    options: {
      port: e.MOCK_UPSTREAM_PORT,
      host: e.MOCK_UPSTREAM_HOST,
      ...(e.MOCK_UPSTREAM_API_KEY ? { apiKey: e.MOCK_UPSTREAM_API_KEY } : {}),
      behaviour: {
        firstTokenLatencyMs: e.MOCK_UPSTREAM_FIRST_TOKEN_MS,
        tokenDelayMs: e.MOCK_UPSTREAM_TOKEN_DELAY_MS,
        completion: e.MOCK_UPSTREAM_COMPLETION,
        maxOutputTokens: e.MOCK_UPSTREAM_MAX_OUTPUT_TOKENS,
        seed: e.MOCK_UPSTREAM_SEED,
        models: e.MOCK_UPSTREAM_MODELS.split(',')
          .map((m) => m.trim())
          .filter(Boolean),
        capacity:
          e.MOCK_UPSTREAM_TPM || e.MOCK_UPSTREAM_RPM
            ? {
                tokensPerMinute: e.MOCK_UPSTREAM_TPM || null,
                requestsPerMinute: e.MOCK_UPSTREAM_RPM || null,
                count: 'requested',
              }
            : null,
      },
    },
  };
}
