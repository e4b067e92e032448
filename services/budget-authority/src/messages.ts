import type { RefusalCode, WindowState } from '@holdfast/events';

const n = (x: number) => Math.round(x).toLocaleString('en-US');
const usd = (micro: number) => `$${(micro / 1_000_000).toFixed(micro < 10_000_000 ? 4 : 2)}`;

export interface RefusalFacts {
  code: RefusalCode;
  tenant: string;
  useCase?: string;
  model?: string;
  /** The budget that did not fit. */
  window?: WindowState | undefined;
  neededTokens: number;
  neededMicroUsd: number;
  inFlight: number;
  maxInFlight?: number | undefined;
  reservationId?: string;
}

function whose(tenant: string, w: WindowState): string {
  return w.tenant === tenant ? `team ${tenant}` : `org ${w.tenant} (above team ${tenant})`;
}

/** Says why a call was refused, in numbers (SPEC section 2). Shown to the caller as is. */
export function refusalMessage(f: RefusalFacts): string {
  switch (f.code) {
    case 'budget_exceeded': {
      const w = f.window;
      if (!w) return `This call does not fit team ${f.tenant}'s budget.`;
      const fmt = w.unit === 'usd' ? usd : (x: number) => `${n(x)} tokens`;
      const need = w.unit === 'usd' ? f.neededMicroUsd : f.neededTokens;
      const verb = w.unit === 'usd' ? 'cost' : 'use';
      if (need > w.limit) {
        return `This call could ${verb} up to ${fmt(need)}, more than the whole ${w.window} budget of ${whose(f.tenant, w)} (${fmt(w.limit)}). Lower max_tokens or raise the budget.`;
      }
      const left = Math.max(0, w.limit - w.used - w.held);
      const held = w.held > 0 ? `; calls in flight hold another ${fmt(w.held)}` : '';
      return `This call could ${verb} up to ${fmt(need)} and ${whose(f.tenant, w)} has ${fmt(left)} left in its ${w.window} window${held}. Lower max_tokens or raise the budget.`;
    }
    case 'concurrency_limit':
      return `Team ${f.tenant} already has ${n(f.inFlight)} calls in flight${f.maxInFlight ? `, its limit of ${n(f.maxInFlight)}` : ''}. Retry when one finishes.`;
    case 'tenant_suspended':
      return `Team ${f.tenant} is suspended. Calls resume when its budget window frees room or an admin resumes it.`;
    case 'unknown_tenant':
      return `Unknown team "${f.tenant}".`;
    case 'use_case_not_registered':
      return `Use case "${f.useCase ?? ''}" is not registered for team ${f.tenant}.`;
    case 'model_not_allowed':
      return `Model "${f.model ?? ''}" is not allowed for use case "${f.useCase ?? ''}" of team ${f.tenant}.`;
    case 'reservation_closed':
      return `Reservation ${f.reservationId ?? ''} was already closed.`;
  }
}
