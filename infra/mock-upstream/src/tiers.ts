import type { Plan } from './plan.js';
import type { MockState } from './state.js';

/**
 * The service tier a call is served (and billed) at, as the provider reports it: OpenAI
 * serves `priority`, `flex` and `scale` as asked and `auto` (or none) at `default`; with
 * `downgradePriority` that share of priority calls is served at `default` (OpenAI does so
 * under load). Anthropic serves `standard_only` at `standard` and `auto` at `priority` when
 * the account has Priority Tier capacity (`priorityTier`), else at `standard`; a downgrade
 * serves it at `standard`. `x-mock-service-tier` names the tier reported for one call.
 */
export function servedTier(
  asked: unknown,
  api: 'openai' | 'anthropic',
  plan: Pick<Plan, 'serviceTier'>,
  state: MockState,
): string {
  if (plan.serviceTier !== undefined) return plan.serviceTier;
  if (api === 'anthropic') {
    if (asked === 'standard_only' || !state.behaviour.priorityTier) return 'standard';
    return state.downgradePriority() ? 'standard' : 'priority';
  }
  if (asked === 'priority') return state.downgradePriority() ? 'default' : 'priority';
  return asked === 'flex' || asked === 'scale' ? asked : 'default';
}
