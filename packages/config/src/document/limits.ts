import { BudgetUnit, BudgetWindow, EventType } from '@holdfast/events';

/**
 * The most of each list a config document may have (docs/configuration.md#limits). Each is far
 * above what a real deployment needs; they keep a hostile or runaway document (an admin script
 * adding keys in a loop) from growing without bound. A document over any of them is refused
 * with `invalid_config` naming the list, and nothing changes.
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

/** The message of a list over its limit: names the limit and what to do. */
export function tooMany(what: string, max: number): string {
  return `at most ${max.toLocaleString('en-US')} ${what} (docs/configuration.md#limits)`;
}
