import type { Admitted, BudgetWindow, WindowState } from '@holdfast/events';
import type { Clamp } from '../call/clamp.js';

/** Response headers Holdfast adds (docs/api.md lists them). */
export const H = {
  reservationId: 'x-holdfast-reservation-id',
  promptTokens: 'x-holdfast-prompt-tokens',
  held: 'x-holdfast-held',
  heldUsd: 'x-holdfast-held-usd',
  maxTokens: 'x-holdfast-max-tokens',
  shrunk: 'x-holdfast-shrink-to-fit',
  unmetered: 'x-holdfast-unmetered',
  requestId: 'x-request-id',
} as const;

const WINDOW_SECONDS = {
  minute: 60,
  day: 86_400,
  month: 30 * 86_400,
} as const satisfies Record<BudgetWindow, number>;

const usd = (micro: number) => (micro / 1_000_000).toFixed(6);

function remaining(w: WindowState): number {
  return Math.max(0, w.limit - w.used - w.held);
}

/**
 * `month-tokens` for the caller's team's budgets, `acme/month-tokens` for an org's above it,
 * `key/day-usd` for its key's own and `user/day-tokens` for its end user's.
 */
function windowName(w: WindowState, tenant: string): string {
  if (w.scope === 'key') return `key/${w.budget}`;
  if (w.scope === 'end_user') return `user/${w.budget}`;
  return w.tenant === tenant ? w.budget : `${w.tenant}/${w.budget}`;
}

/**
 * Per-window remaining budget (`x-holdfast-remaining-month-tokens: 38606`, an org's as
 * `x-holdfast-remaining-acme-month-tokens`, the key's as `x-holdfast-remaining-key-day-usd`,
 * the end user's as `x-holdfast-remaining-user-day-tokens`), and the IETF RateLimit-Policy / RateLimit headers
 * (draft-ietf-httpapi-ratelimit-headers: one item per enforced window, quota unit `tokens` or
 * `microusd`). Shadow budgets are not announced.
 */
export function windowHeaders(
  windows: readonly WindowState[],
  tenant: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  const policy: string[] = [];
  const state: string[] = [];
  for (const w of windows) {
    if (!w.enforce) continue;
    const left = remaining(w);
    const name = windowName(w, tenant);
    out[`x-holdfast-remaining-${name.replace('/', '-')}`] =
      w.unit === 'usd' ? usd(left) : String(left);
    const unit = w.unit === 'usd' ? 'microusd' : 'tokens';
    policy.push(`"${name}";q=${w.limit};w=${WINDOW_SECONDS[w.window]};qu="${unit}"`);
    state.push(`"${name}";r=${left}`);
  }
  if (policy.length > 0) {
    out['ratelimit-policy'] = policy.join(', ');
    out.ratelimit = state.join(', ');
  }
  return out;
}

/** The headers of an admitted call. */
export function admissionHeaders(opts: {
  admitted: Admitted;
  promptTokens: number;
  clamp: Clamp;
  tenant: string;
}): Record<string, string> {
  const { admitted, clamp } = opts;
  const requested = clamp.requested === null ? 'none' : String(clamp.requested);
  const out: Record<string, string> = {
    [H.reservationId]: admitted.reservationId,
    [H.promptTokens]: String(opts.promptTokens),
    [H.held]: String(admitted.heldTokens),
    [H.heldUsd]: usd(admitted.heldMicroUsd),
    [H.maxTokens]: `${admitted.maxTokens}; requested=${requested}; ceiling=${clamp.ceiling}`,
    ...windowHeaders(admitted.windows, opts.tenant),
  };
  if (admitted.shrunk) out[H.shrunk] = `${admitted.maxTokens}; from=${clamp.maxTokens}`;
  return out;
}
