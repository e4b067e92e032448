import { formatUsd, type RefusalCode, type WindowState } from '@holdfast/events';

const n = (x: number) => Math.round(x).toLocaleString('en-US');

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
  /** concurrency_limit: its calls in flight are being adopted into a changed plan (admit.lua walkStep). */
  adopting?: boolean;
  /** end_user_limit: the call's key's own maxEndUsers refused, not the team's. */
  keyLimit?: { keyId: string; maxEndUsers: number };
  /** The call as admission saw it: the prompt as counted, max_tokens after the ceilings. */
  promptTokens?: number;
  maxTokens?: number;
  /**
   * Shrink to fit was tried (reserve mode, `shrinkToFit`): the least output it admits, and the
   * model's prices (pico-USD a token) to say what the prompt with that output costs.
   */
  shrink?: { minOutputTokens: number; price: { input: number; output: number } };
}

/** The shrink facts of a refusal: only where the authority tries shrink to fit (reserve mode). */
export function shrinkFacts(
  mode: string,
  minOutputTokens: number,
  price: { input: number; output: number },
): Pick<RefusalFacts, 'shrink'> {
  return mode === 'reserve' && minOutputTokens > 0 ? { shrink: { minOutputTokens, price } } : {};
}

function whose(tenant: string, w: WindowState): string {
  if (w.scope === 'key') return `key ${w.subject ?? ''} of team ${tenant}`;
  if (w.scope === 'end_user') return `end user ${w.subject ?? ''} of team ${tenant}`;
  return w.tenant === tenant ? `team ${tenant}` : `org ${w.tenant} (above team ${tenant})`;
}

/** What the prompt plus `output` tokens cost, rounded up to a micro-dollar as the authority bills. */
function costMicroUsd(prompt: number, output: number, price: { input: number; output: number }) {
  return Math.ceil((prompt * price.input + output * price.output) / 1_000_000);
}

function budgetExceeded(f: RefusalFacts): string {
  const w = f.window;
  if (!w) return `This call does not fit team ${f.tenant}'s budget.`;
  const usd = w.unit === 'usd';
  const fmt = usd ? formatUsd : (x: number) => `${n(x)} tokens`;
  const need = usd ? f.neededMicroUsd : f.neededTokens;
  const verb = usd ? 'cost' : 'use';
  const { promptTokens: prompt, maxTokens: max } = f;
  // The parts of a worst case (not of adaptive's estimate, which is not prompt + max_tokens).
  const parts =
    prompt !== undefined && max !== undefined && f.neededTokens === prompt + max
      ? ` (${n(prompt)} prompt + ${n(max)} max_tokens)`
      : '';
  const left = Math.max(0, w.limit - w.used - w.held);
  if (f.shrink && prompt !== undefined) {
    const min = usd
      ? costMicroUsd(prompt, f.shrink.minOutputTokens, f.shrink.price)
      : prompt + f.shrink.minOutputTokens;
    const held = w.held > 0 ? `, ${fmt(w.held)} held by calls in flight` : '';
    return `This call could ${verb} up to ${fmt(need)}${parts}, and ${whose(f.tenant, w)} has ${fmt(left)} left in its ${w.window} window (${fmt(w.used)} used${held}, of ${fmt(w.limit)}). Shrink to fit could not make it fit: the prompt with the minimum output of ${n(f.shrink.minOutputTokens)} tokens needs ${fmt(min)}. Shorten the prompt, wait for the window to free room, or raise the budget.`;
  }
  if (need > w.limit) {
    return `This call could ${verb} up to ${fmt(need)}${parts}, more than the whole ${w.window} budget of ${whose(f.tenant, w)} (${fmt(w.limit)}). Lower max_tokens or raise the budget.`;
  }
  const held = w.held > 0 ? `; calls in flight hold another ${fmt(w.held)}` : '';
  return `This call could ${verb} up to ${fmt(need)}${parts} and ${whose(f.tenant, w)} has ${fmt(left)} left in its ${w.window} window${held}. Lower max_tokens or raise the budget.`;
}

/** Says why a call was refused, in numbers (docs/api.md). Shown to the caller as is. */
export function refusalMessage(f: RefusalFacts): string {
  switch (f.code) {
    case 'budget_exceeded':
      return budgetExceeded(f);
    case 'concurrency_limit':
      if (f.adopting)
        return `Team ${f.tenant}'s budgets changed while ${n(f.inFlight)} of its calls were in flight; they are being held on the new budgets, 1,000 per admission, and no call is admitted until all are. Retry in 1 s.`;
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
    case 'end_user_limit':
      if (f.keyLimit) {
        return `Key ${f.keyLimit.keyId} of team ${f.tenant} has already named ${n(f.keyLimit.maxEndUsers)} end users with budgets (its maxEndUsers). A new end user is admitted once one of them has been idle for 31 days, or when the limit is raised.`;
      }
      return `Team ${f.tenant} already has budgets for as many end users as it may track (maxEndUsers). A new end user is admitted once another has been idle for 31 days, or when the limit is raised.`;
    case 'upstream_capacity':
      return `Every upstream of model "${f.model ?? ''}" is at the capacity team ${f.tenant}'s priority may use. This is the provider's limit, not the team's budget: retry shortly.`;
  }
}
