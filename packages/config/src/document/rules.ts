import type { z } from 'zod';
import { checkLimits } from './limits.js';
import { modelPrices, type ModelPrices } from './compile.js';
import { HoldfastConfigShape, type HoldfastConfig, type UpstreamApi } from './schema.js';

/** Max depth of org -> ... -> team chains. */
const MAX_HIERARCHY_DEPTH = 4;

type Ctx = z.core.$RefinementCtx<HoldfastConfig>;

function duplicates<T>(items: readonly T[], key: (t: T) => string): Map<string, number[]> {
  const seen = new Map<string, number[]>();
  items.forEach((item, i) => seen.set(key(item), [...(seen.get(key(item)) ?? []), i]));
  return new Map([...seen].filter(([, at]) => at.length > 1));
}

function unique<T>(
  ctx: Ctx,
  items: readonly T[],
  key: (t: T) => string,
  path: (i: number) => (string | number)[],
  what: string,
) {
  for (const [value, at] of duplicates(items, key)) {
    for (const i of at.slice(1))
      ctx.addIssue({ code: 'custom', path: path(i), message: `duplicate ${what} "${value}"` });
  }
}

/** A list of budgets: one per window and unit, calendar months only, whole token limits. */
function checkBudgets(
  ctx: Ctx,
  budgets: readonly HoldfastConfig['tenants'][number]['budgets'][number][],
  at: (string | number)[],
): void {
  unique(
    ctx,
    budgets,
    (b) => `${b.window}-${b.unit}`,
    (i) => [...at, i],
    'budget window+unit',
  );
  budgets.forEach((b, bi) => {
    if (b.calendar && b.window !== 'month') {
      ctx.addIssue({
        code: 'custom',
        path: [...at, bi, 'calendar'],
        message: 'calendar applies to month windows only',
      });
    }
    if (b.unit === 'tokens' && !Number.isInteger(b.limit)) {
      ctx.addIssue({
        code: 'custom',
        path: [...at, bi, 'limit'],
        message: 'a tokens limit must be an integer',
      });
    }
  });
}

/** ModelPrices' fields by the price field that sets them (the messages name the field). */
const PRICE_FIELDS = {
  input: 'inputPerMTok',
  output: 'outputPerMTok',
  cachedInput: 'cachedInputPerMTok',
  cacheWrite5m: 'cacheWrite5mPerMTok',
  cacheWrite1h: 'cacheWrite1hPerMTok',
  audioInput: 'audioInputPerMTok',
  audioOutput: 'audioOutputPerMTok',
} as const satisfies Record<keyof ModelPrices, string>;

/**
 * A long-context price is never below its tier's own, each field with its defaults applied
 * (cache writes follow the api as the base's do): a call is held at the short price until its
 * count passes the line, so a cheaper long price would let a hold above the line cover less
 * than one below it, and a call the edge counted under the line but billed long be billed
 * under its short bill.
 */
function checkLongContext(
  ctx: Ctx,
  model: HoldfastConfig['models'][number],
  api: UpstreamApi,
  at: (string | number)[],
): void {
  const tiers = [
    [[...at, 'price'], model.price],
    ...Object.entries(model.price.serviceTiers ?? {}).map(
      ([tier, price]) => [[...at, 'price', 'serviceTiers', tier], price] as const,
    ),
  ] as const;
  for (const [path, price] of tiers) {
    if (!price.longContext) continue;
    const short = modelPrices(price, api);
    const long = modelPrices(price.longContext, api);
    for (const [field, name] of Object.entries(PRICE_FIELDS) as [keyof ModelPrices, string][]) {
      if (long[field] >= short[field]) continue;
      ctx.addIssue({
        code: 'custom',
        path: [...path, 'longContext', name],
        message: `a long-context price below the short one (${long[field] / 1e6} < ${short[field] / 1e6} USD/MTok, defaults applied): a hold could cover less than the bill`,
      });
    }
  }
}

/**
 * A search model bills a web search on every chat call: it needs the fee to hold and bill
 * (`price.toolUses.web_search`), and Chat Completions (an `openai` upstream) to be called on.
 */
function checkSearchModel(
  ctx: Ctx,
  m: HoldfastConfig['models'][number],
  api: UpstreamApi | undefined,
  at: (string | number)[],
): void {
  if (!m.searchModel) return;
  if (m.price.toolUses?.web_search === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: [...at, 'price', 'toolUses', 'web_search'],
      message: 'a searchModel is billed a web search on every call: price it here',
    });
  }
  if (api !== undefined && api !== 'openai') {
    ctx.addIssue({
      code: 'custom',
      path: [...at, 'searchModel'],
      message: `searchModel is a Chat Completions model: its upstream must speak openai, not ${api}`,
    });
  }
}

/** Cross-field rules: references resolve, ids are unique, the hierarchy is a forest. */
function checkReferences(cfg: HoldfastConfig, ctx: Ctx): void {
  unique(
    ctx,
    cfg.upstreams,
    (u) => u.id,
    (i) => ['upstreams', i, 'id'],
    'upstream id',
  );
  unique(
    ctx,
    cfg.models,
    (m) => m.id,
    (i) => ['models', i, 'id'],
    'model id',
  );
  unique(
    ctx,
    cfg.tenants,
    (t) => t.id,
    (i) => ['tenants', i, 'id'],
    'tenant id',
  );
  unique(
    ctx,
    cfg.webhooks,
    (w) => w.id,
    (i) => ['webhooks', i, 'id'],
    'webhook id',
  );

  const upstreams = new Map(cfg.upstreams.map((u) => [u.id, u]));
  cfg.models.forEach((m, i) => {
    const api = upstreams.get(m.upstream)?.api;
    checkLongContext(ctx, m, api ?? 'openai', ['models', i]);
    checkSearchModel(ctx, m, api, ['models', i]);
    [m.upstream, ...m.fallbackUpstreams].forEach((u, j) => {
      const path = j === 0 ? ['models', i, 'upstream'] : ['models', i, 'fallbackUpstreams', j - 1];
      const target = upstreams.get(u);
      if (!target) {
        ctx.addIssue({ code: 'custom', path, message: `unknown upstream "${u}"` });
      } else if (api !== undefined && target.api !== api) {
        // A fallback gets the same request body: it must speak the same API.
        ctx.addIssue({
          code: 'custom',
          path,
          message: `upstream "${u}" speaks ${target.api}, the model's upstream ${api}`,
        });
      }
    });
  });

  const models = new Set(cfg.models.map((m) => m.id));
  const tenants = new Map(cfg.tenants.map((t) => [t.id, t]));
  const allKeys = cfg.tenants.flatMap((t, ti) => t.keys.map((k, ki) => ({ k, ti, ki })));
  unique(
    ctx,
    allKeys,
    (x) => x.k.id,
    (i) => ['tenants', allKeys[i]!.ti, 'keys', allKeys[i]!.ki, 'id'],
    'key id',
  );
  unique(
    ctx,
    allKeys,
    (x) => x.k.sha256,
    (i) => ['tenants', allKeys[i]!.ti, 'keys', allKeys[i]!.ki, 'sha256'],
    'key hash',
  );

  cfg.tenants.forEach((t, ti) => {
    unique(
      ctx,
      t.useCases,
      (u) => u.id,
      (i) => ['tenants', ti, 'useCases', i, 'id'],
      'use case id',
    );
    const budgetLists: [
      readonly HoldfastConfig['tenants'][number]['budgets'][number][],
      (string | number)[],
    ][] = [
      [t.budgets, ['tenants', ti, 'budgets']],
      [t.endUserBudgets, ['tenants', ti, 'endUserBudgets']],
      ...t.keys.map(
        (k, ki) =>
          [k.budgets, ['tenants', ti, 'keys', ki, 'budgets']] as [
            typeof t.budgets,
            (string | number)[],
          ],
      ),
    ];
    for (const [list, at] of budgetLists) checkBudgets(ctx, list, at);
    t.useCases.forEach((u, ui) =>
      u.models.forEach((m, mi) => {
        if (!models.has(m))
          ctx.addIssue({
            code: 'custom',
            path: ['tenants', ti, 'useCases', ui, 'models', mi],
            message: `unknown model "${m}"`,
          });
      }),
    );
    const useCases = new Set(t.useCases.map((u) => u.id));
    t.keys.forEach((k, ki) => {
      if (k.defaultUseCase && !useCases.has(k.defaultUseCase)) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', ti, 'keys', ki, 'defaultUseCase'],
          message: `unknown use case "${k.defaultUseCase}"`,
        });
      }
    });
    if (t.parent !== undefined) {
      if (!tenants.has(t.parent)) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', ti, 'parent'],
          message: `unknown tenant "${t.parent}"`,
        });
        return;
      }
      const chain = [t.id];
      for (let p: string | undefined = t.parent; p !== undefined; p = tenants.get(p)?.parent) {
        if (chain.includes(p)) {
          ctx.addIssue({
            code: 'custom',
            path: ['tenants', ti, 'parent'],
            message: `cycle: ${[...chain, p].join(' -> ')}`,
          });
          return;
        }
        chain.push(p);
      }
      if (chain.length > MAX_HIERARCHY_DEPTH) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', ti, 'parent'],
          message: `hierarchy deeper than ${MAX_HIERARCHY_DEPTH} levels`,
        });
      }
    }
  });
}

/** A valid document, as stored: every cross-field rule. */
export const HoldfastConfigSchema = HoldfastConfigShape.superRefine(checkReferences);

/** A document being applied: also within every CONFIG_LIMITS (docs/configuration.md#limits). */
export const NewConfigSchema = HoldfastConfigShape.superRefine((cfg, ctx) => {
  checkLimits(cfg, ctx);
  checkReferences(cfg, ctx);
});
