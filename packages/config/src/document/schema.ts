import {
  AdmissionMode,
  BudgetUnit,
  BudgetWindow,
  EventType,
  KeyId,
  LIMITS,
  ModelId,
  PlainId,
  TenantId,
  ToolUseKind,
  UseCaseId,
} from '@holdfast/events';
import { z } from 'zod';
import { isControlledField } from './fields.js';
import { HiddenInputConfig } from './hidden-input.js';

/**
 * The declarative configuration (docs/configuration.md). Field names are the contract; every field
 * has a default a user would expect, and cross-field rules live in `superRefine` below.
 */

const EnvName = z
  .string()
  .regex(/^[A-Z_][A-Z0-9_]{0,127}$/, 'must be an environment variable name');
const Usd = z.number().min(0).max(LIMITS.maxPricePerMTok);

/** USD per million tokens of one service tier (the base price is the `default` tier's). */
const BasePrice = z.strictObject({
  inputPerMTok: Usd,
  outputPerMTok: Usd,
  cachedInputPerMTok: Usd.optional(),
  cacheWrite5mPerMTok: Usd.optional(),
  cacheWrite1hPerMTok: Usd.optional(),
  audioInputPerMTok: Usd.optional(),
  audioOutputPerMTok: Usd.optional(),
});

/**
 * A tier's long-context price: a request whose input (uncached, cache reads and writes) is
 * above `aboveInputTokens` is billed at these prices, all of it (Anthropic's 1M context
 * window above 200,000 input tokens, OpenAI's GPT-5.4 above 272,000). The same fields and
 * defaults as the tier's own price; none may be below it (rules.ts checkLongContext).
 */
const LongContextPrice = BasePrice.extend({
  aboveInputTokens: z.int().min(1).max(LIMITS.maxPromptTokens),
});

/** One service tier's price, with its long-context price when the provider has one. */
const Price = BasePrice.extend({ longContext: LongContextPrice.optional() });

/**
 * The service tiers a model may price beside its base (`default`, Anthropic's `standard`):
 * OpenAI's `priority`, `flex` and `scale` (Anthropic's Priority Tier is `priority` too).
 */
const PRICED_TIERS = ['priority', 'flex', 'scale'] as const;
export type PricedTier = (typeof PRICED_TIERS)[number];

/**
 * The API an upstream speaks: `openai` (Chat Completions, Responses, embeddings; also every
 * OpenAI-compatible server) or `anthropic` (the Messages API). Its models are served on that
 * API's surfaces only: an `anthropic` model on POST /v1/messages, an `openai` one on the rest.
 */
const UPSTREAM_APIS = ['openai', 'anthropic'] as const;

/**
 * A provider account's limits, shared by every tenant behind the gateway. `counting` says how
 * the provider counts a call against its tokens per minute: `requested` (OpenAI's documented
 * rule: the prompt plus the output it may ask for, on arrival) or `usage` (what it really
 * used, once it ends).
 */
const Capacity = z
  .strictObject({
    tokensPerMinute: z.int().min(1).max(LIMITS.maxBudgetAmount).optional(),
    requestsPerMinute: z.int().min(1).max(100_000_000).optional(),
    counting: z.enum(['requested', 'usage']).default('requested'),
  })
  .refine((c) => c.tokensPerMinute !== undefined || c.requestsPerMinute !== undefined, {
    message: 'give tokensPerMinute, requestsPerMinute or both',
  });

export const Upstream = z.strictObject({
  id: PlainId,
  api: z.enum(UPSTREAM_APIS).default('openai'),
  /**
   * OpenAI-compatible base URL, ending in /v1; for `api: anthropic` the API root
   * (`https://api.anthropic.com`; a trailing /v1 is accepted).
   */
  baseUrl: z.url({ protocol: /^https?$/ }),
  /**
   * Name of an environment variable of the edge that, when it holds an http(s) URL, is used
   * instead of `baseUrl` (one config file for a local mock, compose and a real provider).
   */
  baseUrlEnv: EnvName.optional(),
  /** Name of the environment variable that holds the provider key (never the key itself). */
  apiKeyEnv: EnvName.optional(),
  /** Whole-call timeout for one upstream attempt. */
  timeoutMs: z.int().min(100).max(3_600_000).default(600_000),
  /** Retries on 429/5xx before the edge gives up. */
  maxRetries: z.int().min(0).max(10).default(2),
  /**
   * The provider's limit on its token-counting endpoint (Anthropic's count_tokens, OpenAI's
   * input_tokens), requests a minute: every team shares it as it shares `capacity`, each
   * priority up to its share and each team up to its `tenantShare`, so one team's counts
   * cannot take the others'. Absent: Holdfast does not limit counting (a 429 from the
   * provider still stops it until its Retry-After).
   */
  countsPerMinute: z.int().min(1).max(100_000_000).optional(),
  /**
   * Request fields forwarded as the client sent them beyond the OpenAI ones the edge knows
   * (`top_k`, `repetition_penalty`, `guided_json`, ... of a self-hosted server). Everything
   * else is dropped. Length and count fields (`n_predict`, `max_new_tokens`, `best_of`, ...)
   * can never be listed: the edge always sets or removes them (see fields.ts).
   */
  passThrough: z
    .array(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be a top-level field name')
        .refine((f) => !isControlledField(f), {
          message: 'is a length or count field: the edge always sets or removes it',
        }),
    )
    .max(100)
    .default([]),
  /** The account's limits (every model on this upstream together). */
  capacity: Capacity.optional(),
});

/**
 * `upstream` asks the upstream server to count (the edge resolves it); the rest are
 * @holdfast/tokenizer's names: OpenAI encodings, open-weight families counted with their chat
 * templates, and `estimate`, a proven upper bound for any other model.
 */
const TOKENIZERS = [
  'o200k_base',
  'cl100k_base',
  'llama3',
  'llama3_1',
  'llama3_2',
  'qwen3',
  'qwen2_5',
  'gemma3',
  'deepseek_v3',
  'mistral_nemo',
  'estimate',
  'upstream',
] as const;

export const Model = z.strictObject({
  id: ModelId,
  upstream: PlainId,
  /** Other upstreams that serve the same model, tried after the first one is rate limited. */
  fallbackUpstreams: z.array(PlainId).default([]),
  /** The model name sent upstream, when it differs from `id`. */
  upstreamModel: z.string().min(1).max(256).optional(),
  tokenizer: z.enum(TOKENIZERS).default('estimate'),
  maxOutputTokens: z.int().min(1).max(LIMITS.maxOutputTokens).default(8_192),
  /**
   * USD per million tokens. Reasoning tokens are output. Cached input defaults to the input
   * price; cache writes (Anthropic's prompt caching) default to Anthropic's rates, 1.25x (5
   * minutes) and 2x (1 hour) the input price, on an `anthropic` upstream, and to the input
   * price elsewhere. Holds are priced at the dearest input price of the four, so a call's hold
   * covers whatever mix of cache reads and writes the provider reports. Audio tokens (Chat
   * Completions `input_audio` parts, `modalities: ["audio"]` output) default to the text prices;
   * a call that asks for audio output is held at the dearer of the two output prices.
   * These prices are the `default` service tier's (Anthropic's `standard`); `serviceTiers`
   * prices the others (docs/budgets.md, "How service tiers are priced"). `longContext`, on
   * the base and on each tier, prices requests above a long-context line (docs/budgets.md,
   * "How long context is priced").
   */
  price: Price.extend({
    /**
     * Prices of the provider's other service tiers (OpenAI `service_tier`: priority about 2x,
     * flex 0.5x; Anthropic's Priority Tier), each with the same fields and defaults as the
     * base price. A call that asks for a tier with no price here that could be dearer
     * (priority, scale) is a 400; flex without a price is held and billed at the base price.
     */
    serviceTiers: z.partialRecord(z.enum(PRICED_TIERS), Price).optional(),
    /**
     * The tier the project's `auto` (or no `service_tier`) is served at, when the provider
     * account's default is not the standard tier (OpenAI's project setting): those calls are
     * held at its price. It must have a price in `serviceTiers`.
     */
    autoServiceTier: z.enum(PRICED_TIERS).optional(),
    /**
     * USD per 1,000 uses of the tools the provider runs and bills per use, beside the tokens
     * they read: `web_search` (OpenAI $10, `web_search_preview` on older models up to $25;
     * Anthropic $10), `file_search` ($2.50), `code_interpreter` ($30: $0.03 a container,
     * billed per call), `web_fetch` (Anthropic, free today), `image_generation` (OpenAI's
     * Responses tool, per image at the image model's prices, $11 to $250 by quality and size:
     * the dearest image allowed). A call offering web search, file search, code interpreter
     * or image generation on a model that does not price it is a 400, and a Responses stored
     * prompt (`prompt`) needs all four priced; a priced tool is held at its bound (`max_uses`,
     * `max_tool_calls`) and billed per use reported (docs/budgets.md, "How tool fees are held
     * and billed").
     */
    toolUses: z.partialRecord(ToolUseKind, Usd).optional(),
  }).refine((p) => !p.autoServiceTier || p.serviceTiers?.[p.autoServiceTier] !== undefined, {
    message: 'autoServiceTier must name a tier priced in serviceTiers',
    path: ['autoServiceTier'],
  }),
  /**
   * Input the edge cannot count: Responses calls that continue state kept upstream
   * (`previous_response_id`, `conversation`, a stored `prompt`) or send a file are counted with
   * the upstream's `POST /v1/responses/input_tokens`, Messages `document` blocks with its
   * count_tokens; a chat `file` part has no counting endpoint, and a tool the provider runs
   * (web search, MCP) reads input no endpoint counts. When the upstream cannot count
   * it, such calls are refused with a 400, unless this is set: then they are admitted with the
   * local count of the call's own input plus this many tokens for each piece the edge cannot
   * see, and for each use of a provider-run tool (a search's results, a fetched page: times
   * `max_uses` or `max_tool_calls`; docs/budgets.md "How unseen tool input is held"), a
   * pessimistic allowance the operator states (a longer conversation or file is still billed
   * in full, and recorded as an overrun).
   */
  upstreamStateAllowanceTokens: z.int().min(1).max(LIMITS.maxPromptTokens).optional(),
  /**
   * Messages (an `anthropic` upstream): what the edge holds, on top of its own count of the
   * prompt, for the input Anthropic adds that the request does not show (its tool-use system
   * prompt, the built-in client tools' definitions), when it counts the prompt itself. Each
   * figure defaults to one that covers every published figure and can only be raised, where a
   * newer model's is larger (hidden-input.ts; docs/budgets.md).
   */
  hiddenInputTokens: HiddenInputConfig.optional(),
  /**
   * The most prompt tokens a call to this model may be counted at; above it the call is a 400
   * before anything is held: a context window, or a cap below a long-context line the model's
   * `price.longContext` does not price. Independent of `price.longContext`.
   */
  maxPromptTokens: z.int().min(1).max(LIMITS.maxPromptTokens).optional(),
  /** Limits the provider sets for this model alone, on top of its upstream's. */
  capacity: Capacity.optional(),
  /**
   * The model thinks before it answers with output the provider bills and does not stream
   * (OpenAI's o-series and gpt-5 reason by default; Claude's summarized thinking bills the
   * whole thinking): a call that ends without the provider's usage is billed its admitted
   * output, the edge's count being only what it saw. A call that asks for reasoning
   * (`reasoning_effort`, `reasoning`, Messages `thinking`) is billed so on any model.
   */
  reasoning: z.boolean().default(false),
  /**
   * A Chat Completions search model (OpenAI's gpt-4o-search-preview, gpt-5-search-api): it
   * searches the web on every call and the provider bills a search fee per call its usage
   * does not report. Each chat call is held and billed one `web_search` use at
   * `price.toolUses.web_search` (required), and its `web_search_options` are forwarded
   * (docs/budgets.md, "How tool fees are held and billed"); with `upstreamStateAllowanceTokens`
   * each call is also held that allowance for the search content the provider bills as input
   * (gpt-5-search-api's; the preview models' is free). An `openai` upstream only.
   */
  searchModel: z.boolean().default(false),
});

export const Budget = z.strictObject({
  window: BudgetWindow,
  /** Tokens, or USD (decimals allowed) when unit is usd. */
  limit: z.number().min(0).max(LIMITS.maxBudgetAmount),
  unit: BudgetUnit.default('tokens'),
  /** Soft thresholds, as fractions of the limit; alerts fire when crossed upward. */
  soft: z.array(z.number().gt(0).lt(1)).max(10).default([0.8, 0.95]),
  /** In-flight calls may still settle for this long after a hard-limit suspension, ms. */
  grace: z.int().min(0).max(3_600_000).default(0),
  /** false: a shadow budget, recorded but not enforced. */
  enforce: z.boolean().default(true),
  /** month only: reset on the 1st (UTC) instead of a sliding 30 days. */
  calendar: z.boolean().default(false),
  /**
   * adaptive mode only: how far (tokens, or USD) calls whose hold cannot grow may overrun the
   * limit in total. 0 (default): such calls are admitted only if their worst case fits.
   */
  debt: z.number().min(0).max(LIMITS.maxBudgetAmount).default(0),
});

export const UseCase = z.strictObject({
  id: UseCaseId,
  /** Ceiling for max_tokens; larger requests are clamped to it. */
  maxTokens: z.int().min(1).max(LIMITS.maxOutputTokens),
  models: z.array(ModelId).min(1),
});

export const Key = z.strictObject({
  id: KeyId,
  /** sha256 (hex) of the secret; the secret itself is never stored. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits'),
  /** Use case when the request sends no x-use-case header. */
  defaultUseCase: UseCaseId.optional(),
  /**
   * Budgets of this key alone (one application or developer under the team), checked and
   * charged with the team's and its org's in the same atomic step.
   */
  budgets: z.array(Budget).default([]),
  /** The caller may name the end user in an `x-holdfast-user` header (a trusted backend). */
  allowUserHeader: z.boolean().default(false),
  /**
   * End users named by this key (in the last 31 days) the tenant tracks budgets for, at most:
   * a new end user past it is refused (end_user_limit), so one key cannot take all of the
   * tenant's `maxEndUsers` from its other keys. Unset: only the tenant's limit.
   */
  maxEndUsers: z.int().min(1).max(1_000_000).optional(),
});

export const Tenant = z.strictObject({
  id: TenantId,
  /** The org above this team; budgets of every level are checked in one atomic step. */
  parent: TenantId.optional(),
  mode: AdmissionMode.default('reserve'),
  maxInFlight: z.int().min(1).max(100_000).optional(),
  /** true: admit when the authority does not answer (the default fails closed). */
  failOpen: z.boolean().default(false),
  /** Its share of an upstream's capacity (`capacity.shares`): high work always finds room. */
  priority: z.enum(['high', 'normal', 'low']).default('normal'),
  /**
   * The most of each declared upstream capacity this team's calls may take in any minute:
   * overrides `capacity.tenantShare` for it (a large team given more, a noisy one less).
   */
  capacityShare: z.number().gt(0).max(1).optional(),
  /** How long a call may wait for upstream capacity before it is refused, ms. */
  maxQueueMs: z.int().min(0).max(600_000).default(0),
  /** Lease of a hold never settled, ms (the edge renews it while a call runs). */
  leaseMs: z.int().min(1_000).max(LIMITS.maxLeaseMs).default(1_800_000),
  /**
   * A hold whose lease ran out (its edge died mid-call: nobody knows what the model billed):
   * `bill` charges its worst case, so the books never show less than was spent (a settle that
   * arrives later corrects it to the real usage); `release` gives it back. Default: `bill` in
   * reserve and adaptive modes, `release` otherwise.
   */
  onExpiry: z.enum(['bill', 'release']).optional(),
  /** Refusal events written in full per second; refusals beyond are summarised with a count. */
  refusalEventsPerSecond: z.int().min(1).max(100_000).default(20),
  /** adaptive mode: hold prompt + this percentile of recent real output (per use case and model). */
  adaptive: z
    .strictObject({
      percentile: z.number().gt(0).max(1).default(0.95),
      /** Below this many samples the hold is the full max_tokens. */
      minSamples: z.int().min(1).max(10_000).default(20),
      /** How many recent completions the percentile is taken over. */
      samples: z.int().min(1).max(10_000).default(200),
    })
    .default({ percentile: 0.95, minSamples: 20, samples: 200 }),
  /** Admit a call that does not fit with max_tokens lowered, down to this many tokens. */
  shrinkToFit: z.strictObject({ minOutputTokens: z.int().min(1) }).optional(),
  budgets: z.array(Budget).default([]),
  /**
   * Budgets every end user of the tenant gets (the OpenAI `user` field, the Anthropic
   * `metadata.user_id`, or `x-holdfast-user` where the key allows it), created on first use.
   */
  endUserBudgets: z.array(Budget).default([]),
  /** End users with budgets tracked at once; a new one past this is refused (end_user_limit). */
  maxEndUsers: z.int().min(1).max(1_000_000).default(10_000),
  useCases: z.array(UseCase).default([]),
  keys: z.array(Key).default([]),
});

const Webhook = z.strictObject({
  id: PlainId,
  url: z.url({ protocol: /^https?$/ }),
  /** Environment variable holding the signing secret (Standard Webhooks `whsec_...`). */
  secretEnv: EnvName,
  events: z.array(EventType).min(1),
});

const Alerts = z.strictObject({
  /** Warn when a window is projected to run out within this many seconds. */
  exhaustionHorizonSeconds: z
    .int()
    .min(60)
    .max(30 * 86_400)
    .default(3_600),
  /** Suspend a tenant at 100% of an enforced budget. */
  suspendAtHardLimit: z.boolean().default(true),
});

/** How much of an upstream's capacity each priority may use (fractions of its limits). */
const CapacityShares = z
  .strictObject({
    high: z.number().gt(0).max(1).default(1),
    normal: z.number().gt(0).max(1).default(0.9),
    low: z.number().gt(0).max(1).default(0.7),
  })
  .refine((s) => s.low <= s.normal && s.normal <= s.high, {
    message: 'shares must not decrease with priority (low <= normal <= high)',
  });

export const HoldfastConfigShape = z.strictObject({
  auth: z
    .strictObject({ trustHeaders: z.boolean().default(false) })
    .default({ trustHeaders: false }),
  upstreams: z.array(Upstream).default([]),
  models: z.array(Model).default([]),
  tenants: z.array(Tenant).default([]),
  webhooks: z.array(Webhook).default([]),
  alerts: Alerts.default({ exhaustionHorizonSeconds: 3_600, suspendAtHardLimit: true }),
  capacity: z
    .strictObject({
      shares: CapacityShares.default({ high: 1, normal: 0.9, low: 0.7 }),
      /**
       * The most of each declared limit one tenant's calls may take in any minute, whatever
       * its priority's share: 0.5 leaves half of an upstream's capacity to the other tenants
       * however many calls one sends. 1: no cap of its own (the priority's share only).
       */
      tenantShare: z.number().gt(0).max(1).default(1),
    })
    .default({ shares: { high: 1, normal: 0.9, low: 0.7 }, tenantShare: 1 }),
});

export type HoldfastConfig = z.infer<typeof HoldfastConfigShape>;
export type TenantConfig = z.infer<typeof Tenant>;
export type BudgetConfig = z.infer<typeof Budget>;
export type ModelConfig = z.infer<typeof Model>;
export type PriceConfig = z.infer<typeof BasePrice>;
export type LongContextPriceConfig = z.infer<typeof LongContextPrice>;
export type UpstreamConfig = z.infer<typeof Upstream>;
export type UpstreamApi = UpstreamConfig['api'];
export type UseCaseConfig = z.infer<typeof UseCase>;
