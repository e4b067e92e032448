import { BudgetUnit, BudgetWindow, EventType } from '@holdfast/events';
import type { z } from 'zod';
import type { HoldfastConfig } from './schema.js';

/**
 * The most of each list a config document may have (docs/configuration.md#limits). Each is far
 * above what a real deployment needs; they keep a hostile or runaway document (an admin script
 * adding keys in a loop) from growing without bound. A document over any of them is refused
 * with `invalid_config` naming the list, and nothing changes. They apply to a document being
 * applied, not to one read back from the store (parseConfig's `limits`): a config stored before
 * a limit existed keeps loading.
 */
export const CONFIG_LIMITS = {
  /** One budget per window and unit (the rules refuse a second): 3 windows x 2 units. */
  budgetsPerList: BudgetWindow.options.length * BudgetUnit.options.length,
  tenants: 1_000,
  keysPerTenant: 1_000,
  useCasesPerTenant: 200,
  modelsPerUseCase: 200,
  models: 500,
  upstreams: 100,
  fallbackUpstreams: 10,
  webhooks: 100,
  /** Each event type once. */
  eventsPerWebhook: EventType.options.length,
  /**
   * The whole validated document as JSON (defaults filled in), bytes. Every edge and the
   * alerter read it in one NATS message (`config.get`), and NATS refuses a message over its
   * max_payload (1 MiB by default): 768 KiB leaves room for the reply's envelope and the list
   * of admin changes. A document past it could be stored but never loaded.
   */
  documentBytes: 768 * 1024,
} as const;

const LINK = '(docs/configuration.md#limits)';
const n = (x: number) => x.toLocaleString('en-US');

type Ctx = z.core.$RefinementCtx<HoldfastConfig>;

/** Every list of the document within its CONFIG_LIMITS, and the document within its size. */
export function checkLimits(cfg: HoldfastConfig, ctx: Ctx): void {
  const M = CONFIG_LIMITS;
  const list = (
    items: readonly unknown[],
    max: number,
    what: string,
    path: (string | number)[],
  ) => {
    if (items.length > max) {
      ctx.addIssue({ code: 'custom', path, message: `at most ${n(max)} ${what} ${LINK}` });
    }
  };
  list(cfg.upstreams, M.upstreams, 'upstreams', ['upstreams']);
  list(cfg.models, M.models, 'models', ['models']);
  cfg.models.forEach((m, i) =>
    list(m.fallbackUpstreams, M.fallbackUpstreams, 'fallback upstreams', [
      'models',
      i,
      'fallbackUpstreams',
    ]),
  );
  list(cfg.tenants, M.tenants, 'tenants', ['tenants']);
  const budgets = (items: readonly unknown[], path: (string | number)[]) =>
    list(items, M.budgetsPerList, 'budgets, one per window and unit', path);
  cfg.tenants.forEach((t, ti) => {
    const at = ['tenants', ti];
    budgets(t.budgets, [...at, 'budgets']);
    budgets(t.endUserBudgets, [...at, 'endUserBudgets']);
    list(t.useCases, M.useCasesPerTenant, 'use cases per tenant', [...at, 'useCases']);
    t.useCases.forEach((u, ui) =>
      list(u.models, M.modelsPerUseCase, 'models per use case', [...at, 'useCases', ui, 'models']),
    );
    list(t.keys, M.keysPerTenant, 'keys per tenant', [...at, 'keys']);
    t.keys.forEach((k, ki) => budgets(k.budgets, [...at, 'keys', ki, 'budgets']));
  });
  list(cfg.webhooks, M.webhooks, 'webhooks', ['webhooks']);
  cfg.webhooks.forEach((w, i) =>
    list(w.events, M.eventsPerWebhook, 'event types (each once)', ['webhooks', i, 'events']),
  );
  const bytes = Buffer.byteLength(JSON.stringify(cfg));
  if (bytes > M.documentBytes) {
    ctx.addIssue({
      code: 'custom',
      path: [],
      message: `the document is ${n(bytes)} bytes as JSON (defaults filled in), over the limit of ${n(M.documentBytes)} ${LINK}`,
    });
  }
}
