import type { CapacityUsage, TenantUsage, UsageReply, WindowState } from '@holdfast/events';
import { Err, Ok, type AuthorityClient, type Result } from '@holdfast/runtime';
import type { CompiledConfig } from '@holdfast/config';
import { printable } from '../auth.js';
import { fromAuthority } from '../authority-errors.js';
import { EdgeError } from '../errors.js';
import type { Viewer } from './viewer.js';

/** One budget window as `/v1/budgets` shows it. Amounts are tokens, or micro-USD for usd. */
export interface WindowView extends WindowState {
  /** Soft thresholds, fractions of the limit. */
  soft: number[];
  /** limit - used - held, at least 0: what a new call may still reserve. */
  remaining: number;
}

export interface TenantView extends Omit<TenantUsage, 'windows' | 'thresholds'> {
  /** The tenant's own windows, then those of the levels above it. */
  windows: WindowView[];
}

export interface BudgetsView {
  object: 'budgets';
  /** When the authority read the ledger. */
  time: string;
  scope: Viewer['kind'];
  tenants: TenantView[];
  /** Declared upstream capacity and its use in the last minute (the admin only). */
  capacity: CapacityUsage[];
}

function toView(reply: UsageReply, viewer: Viewer): BudgetsView {
  return {
    object: 'budgets',
    time: reply.time,
    scope: viewer.kind,
    capacity: viewer.kind === 'admin' ? reply.capacity : [],
    tenants: reply.tenants.map(({ windows, thresholds, ...rest }) => ({
      ...rest,
      windows: windows.map((w) => ({
        ...w,
        soft: thresholds[`${w.tenant}/${w.budget}`] ?? [],
        remaining: Math.max(0, w.limit - w.used - w.held),
      })),
    })),
  };
}

/**
 * The budgets a viewer may see, read from the authority's ledger: every tenant for the admin
 * and an open page, one tenant (with the levels above it) for a tenant. `only` narrows to one
 * tenant; a tenant outside the viewer's scope is answered like an unknown one.
 */
export async function readBudgets(
  authority: AuthorityClient,
  cfg: CompiledConfig | undefined,
  viewer: Viewer,
  only?: string,
): Promise<Result<BudgetsView, EdgeError>> {
  const own = viewer.kind === 'tenant' ? viewer.tenant : undefined;
  const tenant = only ?? own;
  if (
    only !== undefined &&
    ((own !== undefined && only !== own) || (cfg !== undefined && !cfg.tenants.has(only)))
  ) {
    return Err(
      new EdgeError({
        code: 'not_found',
        message: `No tenant "${printable(only)}" in your view.`,
        param: 'tenant',
      }),
    );
  }
  const reply = await authority.usage(tenant === undefined ? {} : { tenant });
  if (!reply.ok) return Err(fromAuthority(reply.error));
  return Ok(toView(reply.value, viewer));
}
