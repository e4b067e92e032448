import { randomUUID } from 'node:crypto';
import { toolUsePrices, toolUsesText } from '@holdfast/config';
import {
  isoTime,
  type ExtendReply,
  type ExtendRequest,
  type RenewReply,
  type RenewRequest,
  type ToolUseKind,
} from '@holdfast/events';
import { Ok, type Result, type RpcError } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { planFor, orphanPlan, type PlanCall } from '../script-args.js';
import { run, withDeclared } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from '../store-error.js';

/**
 * Grows a live hold to cover more output, if every window still has room (extend.lua). A hold
 * whose tenant left its org (moved, or removed from the config) cannot be checked against
 * limits any more: it does not grow, and the call ends at what the hold covers.
 */
export async function extend(
  ctx: HandlerContext,
  req: ExtendRequest,
): Promise<Result<ExtendReply, RpcError>> {
  // The edge serves a newer config than this replica (see ExtendRequest.configVersion). A failed
  // load decides on the config this replica has, as admit does.
  if (req.configVersion !== undefined) await ctx.config.atLeast(req.configVersion).catch(() => {});
  const cfg = ctx.config.current;
  const tenant = cfg.tenants.get(req.tenant);
  const org = req.org ?? tenant?.org;
  if (!tenant || tenant.org !== org) {
    ctx.metrics.extensions.inc({ status: 'refused' });
    return Ok({
      status: 'refused',
      heldTokens: 0,
      heldMicroUsd: 0,
      coveredOutputTokens: 0,
      windows: [],
    });
  }
  const model = req.model === undefined ? undefined : cfg.models.get(req.model);
  const attempt = (who: PlanCall, askSubjects: boolean) => {
    const plan = planFor(
      cfg,
      tenant,
      ctx.keys,
      ctx.scriptNow(),
      ctx.keys.reservation(tenant.org, req.reservationId),
      who,
    );
    const spec = plan.json({
      resId: req.reservationId,
      outputTokens: req.outputTokens,
      ...(req.billed
        ? {
            billedPrompt: req.billed.promptTokens,
            billedOutput: req.billed.outputTokens,
            ...(req.billed.toolUses ? billedTools(req.billed.toolUses, model) : {}),
          }
        : {}),
      eventId: randomUUID(),
      askSubjects,
    });
    // A hold on windows the plan lacks asks for them (withDeclared).
    return withDeclared((extra) =>
      withStore(ctx.logger, 'extend', () =>
        run(ctx.redis, 'extend', [...plan.keys, ...extra], spec),
      ),
    );
  };
  let result = await attempt({ keyId: req.keyId, endUser: req.endUser }, true);
  if (result.ok && result.value[0] === 'subjects') {
    // The hold is on its key's or end user's windows, which the request did not name.
    const [, keyId = '', endUser = ''] = result.value;
    result = await attempt({ keyId: keyId || null, endUser: endUser || undefined }, false);
  }
  if (!result.ok) return result;
  const [status, heldT, heldU, covered, windows] = result.value;
  ctx.metrics.extensions.inc({ status: status ?? 'unknown' });
  return Ok({
    status: status as ExtendReply['status'],
    heldTokens: Number(heldT),
    heldMicroUsd: Number(heldU),
    coveredOutputTokens: Number(covered),
    windows: parseWindows(windows ?? ''),
  });
}

/**
 * A failed attempt's provider-run tool uses, as extend.lua prices them: `kind:count` texts
 * (close.lua's), and the model's current fees for a hold recorded without its own.
 */
function billedTools(
  uses: Partial<Record<ToolUseKind, number>>,
  model: Parameters<typeof toolUsePrices>[0] | undefined,
): { billedTools: string; toolPrices: string } {
  return {
    billedTools: toolUsesText(uses),
    toolPrices: model ? toolUsesText(toolUsePrices(model)) : '',
  };
}

/** Extends a live hold's lease by its lease length from now (renew.lua). */
export async function renew(
  ctx: HandlerContext,
  req: RenewRequest,
): Promise<Result<RenewReply, RpcError>> {
  const org = req.org ?? ctx.config.current.tenants.get(req.tenant)?.org ?? req.tenant;
  const plan = orphanPlan(
    ctx.keys,
    org,
    req.tenant,
    ctx.scriptNow(),
    ctx.keys.reservation(org, req.reservationId),
  );
  // The in-flight sets of the tenant's levels (renew.lua moves the hold's expiry in each); a
  // record on others (its team moved) asks for theirs (withDeclared).
  const tenant = ctx.config.current.tenants.get(req.tenant);
  const chain = tenant?.org === org ? tenant.chain.map((id) => ctx.keys.holds(org, id)) : [];
  const spec = plan.json({ resId: req.reservationId });
  const result = await withDeclared((extra) =>
    withStore(ctx.logger, 'renew', () =>
      run(ctx.redis, 'renew', [...plan.keys, ...chain, ...extra], spec),
    ),
  );
  if (!result.ok) return result;
  const [status = 'unknown', expiresAt = '0'] = result.value;
  return Ok({
    status: status as RenewReply['status'],
    expiresAt: status === 'unknown' ? null : isoTime(Number(expiresAt)),
  });
}
