import {
  thresholdKey,
  type CapacityUsage,
  type TenantUsage,
  type UsageReply,
  type WindowState,
} from '@holdfast/events';
import { Err, Ok, type AuthorityClient, type Result } from '@holdfast/runtime';
import type { CompiledConfig } from '@holdfast/config';
import { printable } from '../request/auth.js';
import { fromAuthority } from '../authority/errors.js';
import { EdgeError } from '../errors.js';
import type { Viewer } from './viewer.js';

/** One budget window as `/v1/budgets` shows it. Amounts are tokens, or micro-USD for usd. */
export interface WindowView extends WindowState {
  /** Soft thresholds, fractions of the limit. */
  soft: number[];
  /** limit - used - held, at least 0: what a new call may still reserve. */
  remaining: number;
}

export interface TenantView extends Omit<
  TenantUsage,
  'windows' | 'thresholds' | 'keys' | 'endUsers'
> {
  /** The tenant's own windows, then those of the levels above it. */
  windows: WindowView[];
  /** Its keys with budgets of their own. */
  keys: { id: string; windows: WindowView[] }[];
  /** Its end users with budgets, the most recently seen first (at most 100; none on an open page). */
  endUsers: { id: string; lastSeen: string; windows: WindowView[] }[];
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
    tenants: reply.tenants.map(({ windows, thresholds, keys, endUsers, ...rest }) => {
      const view = (list: WindowState[]): WindowView[] =>
        list.map((w) => ({
          ...w,
          soft: thresholds[thresholdKey(w)] ?? [],
          remaining: Math.max(0, w.limit - w.used - w.held),
        }));
      return {
        ...rest,
        windows: view(windows),
        keys: keys.map((k) => ({ id: k.id, windows: view(k.windows) })),
        // End user ids are the teams' customers' (emails, user ids): shown to a credential only.
        endUsers:
          viewer.kind === 'public' ? [] : endUsers.map((u) => ({ ...u, windows: view(u.windows) })),
      };
    }),
  };
}

/**
 * The budgets a viewer may see, read from the authority's ledger: every tenant for the admin
 * and an open page, one tenant (with the levels above it) for a tenant. `only` narrows to one
 * tenant; a tenant outside the viewer's scope is answered like an unknown one. `endUser`
 * (with a tenant) lists that end user's windows instead of the most recently seen ones.
 */
export async function readBudgets(
  authority: AuthorityClient,
  cfg: CompiledConfig | undefined,
  viewer: Viewer,
  only?: string,
  endUser?: string,
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
  if (endUser !== undefined && viewer.kind === 'public') {
    return Err(
      new EdgeError({
        code: 'invalid_api_key',
        message:
          "Send Authorization: Bearer <admin token or the team's key> to look up an end user.",
        param: 'end_user',
      }),
    );
  }
  if (endUser !== undefined && tenant === undefined) {
    return Err(
      new EdgeError({
        code: 'invalid_request',
        message: 'Name the tenant of the end user: ?tenant=<id>&end_user=<id>.',
        param: 'end_user',
      }),
    );
  }
  const reply = await authority.usage(
    tenant === undefined ? {} : { tenant, ...(endUser === undefined ? {} : { endUser }) },
  );
  if (!reply.ok) return Err(fromAuthority(reply.error));
  return Ok(toView(reply.value, viewer));
}
