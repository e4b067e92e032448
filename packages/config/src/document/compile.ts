import { createHash } from 'node:crypto';
import type { BudgetUnit, BudgetWindow } from '@holdfast/events';
import type {
  BudgetConfig,
  HoldfastConfig,
  LongContextPriceConfig,
  ModelConfig,
  PriceConfig,
  PricedTier,
  TenantConfig,
  UpstreamApi,
  UpstreamConfig,
  UseCaseConfig,
} from './schema.js';

/** A budget with its limit in integer base units: tokens, or micro-USD for usd budgets. */
export interface CompiledBudget {
  id: `${BudgetWindow}-${BudgetUnit}`;
  /** The tenant (level) that owns the budget. */
  tenant: string;
  window: BudgetWindow;
  unit: BudgetUnit;
  limit: number;
  soft: number[];
  grace: number;
  enforce: boolean;
  calendar: boolean;
  /** adaptive mode: total overrun allowed to calls whose hold cannot grow (base units). */
  debt: number;
  /** Whose budget: the tenant's own, one key's, or each end user's (`subject` per call). */
  scope: 'tenant' | 'key' | 'end_user';
  /** The key id (scope key); null otherwise (an end user's is the call's). */
  subject: string | null;
}

export interface CompiledTenant extends Omit<
  TenantConfig,
  'budgets' | 'useCases' | 'onExpiry' | 'endUserBudgets'
> {
  /** Budgets of its keys that have their own, by key id. */
  keyBudgets: Map<string, CompiledBudget[]>;
  /** The budgets each end user gets (scope end_user; the subject is the call's end user). */
  endUserBudgets: CompiledBudget[];
  /** The keys with a `maxEndUsers` of their own, by key id. */
  keyMaxEndUsers: Map<string, number>;
  /** What expiry does with a hold nobody closed (the mode's default applied). */
  onExpiry: 'bill' | 'release';
  /** The root of the hierarchy; its id is the Redis hash tag of every key of the tree. */
  org: string;
  /** This tenant, then its parent, ..., then the org. */
  chain: string[];
  budgets: CompiledBudget[];
  useCases: Map<string, UseCaseConfig>;
}

/** Model prices in integer pico-USD per token ($1/MTok = 1,000,000 pico-USD a token). */
export interface ModelPrices {
  input: number;
  output: number;
  cachedInput: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  /** Audio prompt and completion tokens (OpenAI's audio models). */
  audioInput: number;
  audioOutput: number;
}

/** A tier's long-context price: above `above` input tokens a request is billed at `prices`. */
interface LongContextPrices {
  above: number;
  prices: ModelPrices;
}

export interface CompiledModel extends ModelConfig {
  /** The base price: the `default` service tier's (Anthropic's `standard`). */
  pricePico: ModelPrices;
  /** The other service tiers priced (`price.serviceTiers`), defaults applied as the base's. */
  tierPricePico: Partial<Record<PricedTier, ModelPrices>>;
  /** The long-context prices by tier (`default` the base's), of the tiers that have one. */
  longPricePico: Partial<Record<typeof BASE_TIER | PricedTier, LongContextPrices>>;
  /** The API of the model's upstream (its fallbacks speak the same one). */
  api: UpstreamApi;
}

export interface CompiledConfig {
  raw: HoldfastConfig;
  /** sha256 of the canonical JSON of the config. */
  hash: string;
  tenants: Map<string, CompiledTenant>;
  models: Map<string, CompiledModel>;
  upstreams: Map<string, UpstreamConfig>;
  /** Virtual keys by the sha256 of their secret. */
  keysByHash: Map<
    string,
    { tenant: string; keyId: string; defaultUseCase: string | undefined; allowUserHeader: boolean }
  >;
}

function usdToMicro(usd: number): number {
  return Math.round(usd * 1_000_000);
}

function usdPerMTokToPico(usd: number): number {
  return Math.round(usd * 1_000_000);
}

function configHash(cfg: HoldfastConfig): string {
  return createHash('sha256').update(JSON.stringify(cfg)).digest('hex');
}

function compileBudget(
  b: BudgetConfig,
  tenant: string,
  scope: CompiledBudget['scope'],
  subject: string | null,
): CompiledBudget {
  return {
    id: `${b.window}-${b.unit}`,
    tenant,
    window: b.window,
    unit: b.unit,
    limit: b.unit === 'usd' ? usdToMicro(b.limit) : b.limit,
    soft: [...b.soft].sort((a, c) => a - c),
    grace: b.grace,
    enforce: b.enforce,
    calendar: b.calendar,
    debt: b.unit === 'usd' ? usdToMicro(b.debt) : Math.round(b.debt),
    scope,
    subject,
  };
}

function compileTenant(t: TenantConfig, byId: Map<string, TenantConfig>): CompiledTenant {
  const chain = [t.id];
  for (let p = t.parent; p !== undefined; p = byId.get(p)?.parent) chain.push(p);
  const { budgets, useCases, onExpiry, endUserBudgets, ...rest } = t;
  return {
    ...rest,
    onExpiry: onExpiry ?? (t.mode === 'reserve' || t.mode === 'adaptive' ? 'bill' : 'release'),
    org: chain[chain.length - 1]!,
    chain,
    budgets: budgets.map((b) => compileBudget(b, t.id, 'tenant', null)),
    keyBudgets: new Map(
      t.keys
        .filter((k) => k.budgets.length > 0)
        .map((k) => [k.id, k.budgets.map((b) => compileBudget(b, t.id, 'key', k.id))]),
    ),
    endUserBudgets: endUserBudgets.map((b) => compileBudget(b, t.id, 'end_user', null)),
    keyMaxEndUsers: new Map(
      t.keys.flatMap((k) => (k.maxEndUsers === undefined ? [] : [[k.id, k.maxEndUsers]])),
    ),
    useCases: new Map(useCases.map((u) => [u.id, u])),
  };
}

/** One tier's price as configured, with its long-context price. */
type TierPrice = PriceConfig & { longContext?: LongContextPriceConfig | undefined };

/** Anthropic's prompt-cache write rates, as multiples of the input price. */
const ANTHROPIC_CACHE_WRITE = { fiveMinutes: 1.25, oneHour: 2 } as const;

/** A model's prices in pico-USD per token, the defaults of the optional ones applied. */
export function modelPrices(price: PriceConfig, api: UpstreamApi): ModelPrices {
  const input = price.inputPerMTok;
  const write = (rate: number) => (api === 'anthropic' ? input * rate : input);
  return {
    input: usdPerMTokToPico(input),
    output: usdPerMTokToPico(price.outputPerMTok),
    cachedInput: usdPerMTokToPico(price.cachedInputPerMTok ?? input),
    cacheWrite5m: usdPerMTokToPico(
      price.cacheWrite5mPerMTok ?? write(ANTHROPIC_CACHE_WRITE.fiveMinutes),
    ),
    cacheWrite1h: usdPerMTokToPico(
      price.cacheWrite1hPerMTok ?? write(ANTHROPIC_CACHE_WRITE.oneHour),
    ),
    audioInput: usdPerMTokToPico(price.audioInputPerMTok ?? input),
    audioOutput: usdPerMTokToPico(price.audioOutputPerMTok ?? price.outputPerMTok),
  };
}

/**
 * The dearest price an input token of a call can be billed at (uncached, cached, or written
 * to a cache; audio too when the call sends audio): what a hold prices the prompt at, since
 * the edge cannot know the mix upfront.
 */
export function holdInputPrice(p: ModelPrices, audioInput = false): number {
  const text = Math.max(p.input, p.cachedInput, p.cacheWrite5m, p.cacheWrite1h);
  return audioInput ? Math.max(text, p.audioInput) : text;
}

/**
 * The dearest price an output token of a call can be billed at: with audio output asked for
 * (Chat Completions `modalities: ["audio"]`), any of its tokens may be audio.
 */
export function holdOutputPrice(p: ModelPrices, audioOutput: boolean): number {
  return audioOutput ? Math.max(p.output, p.audioOutput) : p.output;
}

/** The base tier's name: what Holdfast bills and records a call served at the base price as. */
export const BASE_TIER = 'default';

/** A model's prices at a service tier (`default`: the base price); undefined: not priced. */
export function tierPrices(
  model: Pick<CompiledModel, 'pricePico' | 'tierPricePico'>,
  tier: string,
): ModelPrices | undefined {
  if (tier === BASE_TIER) return model.pricePico;
  return Object.hasOwn(model.tierPricePico, tier)
    ? model.tierPricePico[tier as PricedTier]
    : undefined;
}

/**
 * The long-context prices a request of `inputTokens` input at `tier` is billed at: the tier's
 * `longContext` when its input is above the line; undefined when it is not (or the tier has
 * no long-context price): the tier's own prices apply. The authority holds a call with it
 * (admit, on the admitted prompt count) and close.lua bills with the same rule.
 */
export function longContextPrices(
  model: Pick<CompiledModel, 'longPricePico'>,
  tier: string,
  inputTokens: number,
): ModelPrices | undefined {
  const long = Object.hasOwn(model.longPricePico, tier)
    ? model.longPricePico[tier as PricedTier]
    : undefined;
  return long !== undefined && inputTokens > long.above ? long.prices : undefined;
}

function longPrices(
  price: { longContext?: LongContextPriceConfig | undefined },
  api: UpstreamApi,
): LongContextPrices | undefined {
  const long = price.longContext;
  return long && { above: long.aboveInputTokens, prices: modelPrices(long, api) };
}

/** Builds the lookup structures services use; the config must already be validated. */
export function compileConfig(raw: HoldfastConfig): CompiledConfig {
  const byId = new Map(raw.tenants.map((t) => [t.id, t]));
  const tenants = new Map(raw.tenants.map((t) => [t.id, compileTenant(t, byId)]));
  const upstreams = new Map(raw.upstreams.map((u) => [u.id, u]));
  const models = new Map(
    raw.models.map((m): [string, CompiledModel] => {
      const api = upstreams.get(m.upstream)?.api ?? 'openai';
      const tiers = Object.entries(m.price.serviceTiers ?? {}) as [PricedTier, TierPrice][];
      const tierPricePico = Object.fromEntries(
        tiers.map(([tier, price]) => [tier, modelPrices(price, api)]),
      );
      const longPricePico = Object.fromEntries(
        [[BASE_TIER, m.price] as const, ...tiers].flatMap(([tier, price]) => {
          const long = longPrices(price, api);
          return long ? [[tier, long]] : [];
        }),
      );
      return [
        m.id,
        { ...m, api, pricePico: modelPrices(m.price, api), tierPricePico, longPricePico },
      ];
    }),
  );
  const keysByHash = new Map(
    raw.tenants.flatMap((t) =>
      t.keys.map(
        (k) =>
          [
            k.sha256,
            {
              tenant: t.id,
              keyId: k.id,
              defaultUseCase: k.defaultUseCase,
              allowUserHeader: k.allowUserHeader,
            },
          ] as const,
      ),
    ),
  );
  return {
    raw,
    hash: configHash(raw),
    tenants,
    models,
    upstreams,
    keysByHash,
  };
}

/** Every budget that applies to a call of `tenant`: its own, then its ancestors'. */
export function budgetsInChain(cfg: CompiledConfig, tenant: CompiledTenant): CompiledBudget[] {
  return tenant.chain.flatMap((id) => cfg.tenants.get(id)?.budgets ?? []);
}
