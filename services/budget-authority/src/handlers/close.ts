import { hash } from 'node:crypto';
import type {
  CloseReply,
  CloseStatus,
  ReleaseRequest,
  SettleRequest,
  Usage,
} from '@holdfast/events';
import { firstOwned } from '@holdfast/events';
import type { z } from 'zod';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import type { HandlerContext } from '../context.js';
import { orphanPlan, planFor, type PlanCall } from '../script-args.js';
import { run, withDeclared } from '../scripts.js';
import { parseWindows } from '../windows.js';
import { withStore } from '../store-error.js';
import { closeCapacity } from '../capacity.js';
import { durably } from '../durable.js';
import type { ChainableCommander } from 'ioredis';
import { toolUsePrices, toolUsesText, type CompiledTenant } from '@holdfast/config';

type CloseOp =
  | { op: 'settle'; usage: Usage; outcome: string }
  | { op: 'release'; reason: string; answeredRequests?: number | undefined }
  | { op: 'expire' };

export type CloseResult = CloseReply & {
  status: CloseStatus | 'expired' | 'not_due';
  /**
   * The upstream whose capacity the call holds: its admission's, or its last capacity.move's
   * ('': one that declares none); absent for a hold admitted before admissions recorded it and
   * never moved (the edge's `upstream` is the admission's). Not sent.
   */
  capacityOn?: string;
  /**
   * The fallback of a capacity.move claimed and not recorded when the call closed: what it may
   * have taken there is given back (`capacityOn` is the upstream that move leaves). Not sent.
   */
  capacityMoving?: string;
};

/**
 * Runs close.lua for one reservation. `org` is where the reservation lives (the admission
 * said so); the tenant's current plan is passed along only when the tenant still lives in
 * that org, else the record alone closes it. `tenant` '' (expiry) closes whoever holds it.
 */
export async function closeReservation(
  ctx: HandlerContext,
  target: {
    tenant: string;
    org?: string | undefined;
    reservationId: string;
    keyId?: string | null | undefined;
    endUser?: string | undefined;
    /** The call's model: its current tool-use prices bill a record that kept none. */
    model?: string | undefined;
  },
  what: CloseOp,
): Promise<Result<CloseResult, RpcError>> {
  const cfg = ctx.config.current;
  const tenant = target.tenant === '' ? undefined : cfg.tenants.get(target.tenant);
  if (!tenant && target.tenant !== '' && target.org === undefined) {
    // Without its org, a reservation of a tenant the config does not have cannot be found.
    return Err(
      new RpcError({ code: 'invalid_request', message: `unknown tenant "${target.tenant}"` }),
    );
  }
  const org = target.org ?? tenant?.org ?? target.tenant;
  const resKey = ctx.keys.reservation(org, target.reservationId);
  const now = ctx.scriptNow();
  const inTree = tenant !== undefined && tenant.org === org;
  const model = target.model === undefined ? undefined : cfg.models.get(target.model);
  const toolPrices = model ? toolUsesText(toolUsePrices(model)) : '';
  const attempt = (who: PlanCall, askSubjects: boolean) => {
    const plan = inTree
      ? planFor(cfg, tenant, ctx.keys, now, resKey, who)
      : orphanPlan(ctx.keys, org, target.tenant, now, resKey);
    const ahead = inTree ? keysAhead(ctx, tenant, who, what, target.model) : [];
    const args = closeSpec(now, target.reservationId, what, askSubjects, toolPrices);
    // Every key close.lua touches is declared: the plan's, those it most likely needs besides,
    // and any other it asks for (a record on other levels or windows than the plan's).
    return withDeclared((extra) =>
      withStore(ctx.logger, what.op, () =>
        run(ctx.redis, 'close', [...plan.keys, ...ahead, ...extra], args, plan),
      ),
    );
  };
  const anyone = target.tenant === '';
  let result = await attempt({ keyId: target.keyId, endUser: target.endUser }, inTree || anyone);
  if (result.ok && result.value[0] === 'tenant') {
    // An expiry found in the org's lease index: closed with its tenant's plan (when the tenant
    // still lives in this org), so its event carries the windows it bills.
    const [, owner = '', keyId = '', endUser = ''] = result.value;
    const who = { keyId: keyId || null, endUser: endUser || undefined };
    if (owner === '') result = await attempt(who, false);
    else return closeReservation(ctx, { ...target, org, tenant: owner, ...who }, what);
  }
  if (result.ok && result.value[0] === 'subjects') {
    // The record holds on its key's or end user's windows, which the request did not name.
    const [, keyId = '', endUser = ''] = result.value;
    result = await attempt({ keyId: keyId || null, endUser: endUser || undefined }, false);
  }
  if (!result.ok) return result;
  const [
    status = 'unknown',
    billed = '0',
    cost = '0',
    windows = '',
    overT = '0',
    overU = '0',
    on = '-',
    moving,
  ] = result.value;
  return Ok({
    ...(on === '-' ? {} : { capacityOn: on }),
    ...(moving ? { capacityMoving: moving } : {}),
    status: status as CloseStatus,
    billedTokens: Number(billed),
    costMicroUsd: Number(cost),
    windows: parseWindows(windows),
    overrunTokens: Number(overT),
    overrunMicroUsd: Number(overU),
  });
}

/** At most this many adaptive use cases get their samples lists declared ahead (keysAhead). */
const SAMPLES_AHEAD = 4;

/**
 * Keys close.lua touches beyond the plan's on a common path, declared with it so that path is
 * one call: an end user's registries (its tenant's and its key's: close.lua forgets an end
 * user a call tracked and left with nothing), and an adaptive settle's samples list (the
 * request names the model, not the use case: each use case's, when the tenant has few). Any
 * other it needs it asks for (withDeclared).
 */
function keysAhead(
  ctx: HandlerContext,
  tenant: CompiledTenant,
  who: PlanCall,
  what: CloseOp,
  model: string | undefined,
): string[] {
  const out: string[] = [];
  if (who.endUser && tenant.endUserBudgets.length > 0) {
    out.push(ctx.keys.users(tenant.org, tenant.id));
    if (who.keyId) out.push(ctx.keys.keyUsers(tenant.org, tenant.id, who.keyId));
  }
  if (
    what.op === 'settle' &&
    tenant.mode === 'adaptive' &&
    model !== undefined &&
    tenant.useCases.size <= SAMPLES_AHEAD
  ) {
    for (const useCase of tenant.useCases.keys())
      out.push(ctx.keys.samples(tenant.org, tenant.id, useCase, model));
  }
  return out;
}

/**
 * The id of a reservation's close event (and of its overrun event): derived from the
 * reservation and the operation, not random. A settle that a Redis failover lost after the
 * relay had published its event, applied again on the promoted replica, gets the same id, and
 * JetStream's duplicate window drops the copy: the events count it once, as the ledger does.
 * Another operation (an expiry the failover lost, then a settle) keeps an id of its own.
 */
export function closeEventId(reservationId: string, op: string): string {
  // One-shot: the same digest as createHash().update().digest(), at half its cost (issue 14).
  const h = hash('sha256', `${reservationId}:${op}`, 'hex');
  // A UUID (version 8: custom) in canonical form.
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** close.lua's ARGV (see its header): the call's; the plan's follow (run). */
function closeSpec(
  now: number | undefined,
  reservationId: string,
  what: CloseOp,
  askSubjects: boolean,
  toolPrices: string,
): string[] {
  const u = what.op === 'settle' ? what.usage : undefined;
  const toolUses = u?.toolUses ? toolUsesText(u.toolUses) : '';
  // The usage's rarer parts: '' when the provider reported none (close.lua reads them only
  // then; each FCALL argument costs Redis a string and a slot, read or not).
  const extra = [
    u?.cacheWrite5mTokens ?? 0,
    u?.cacheWrite1hTokens ?? 0,
    u?.audioPromptTokens ?? 0,
    u?.audioCompletionTokens ?? 0,
  ];
  const longest = u?.longestPromptTokens ?? '';
  const rare =
    extra.every((n) => n === 0) && longest === '' && toolUses === ''
      ? ''
      : [...extra, longest, toolUses, toolUses === '' ? '' : toolPrices].join('\u0001');
  return [
    now === undefined ? '' : String(now),
    reservationId,
    closeEventId(reservationId, what.op),
    what.op,
    String(u?.promptTokens ?? 0),
    String(u?.completionTokens ?? 0),
    String(u?.cachedPromptTokens ?? 0),
    String(u?.reasoningTokens ?? 0),
    what.op === 'settle' ? what.outcome : '',
    askSubjects ? '1' : '0',
    u?.serviceTier ?? '',
    // Read on an overrun or a release only.
    `${closeEventId(reservationId, `${what.op}:overrun`)}\u0001${releaseText(what)}`,
    rare,
  ];
}

/** A release's reason, then the requests it keeps when named (close.lua's ARGV[12]). */
function releaseText(what: CloseOp): string {
  if (what.op !== 'release') return '';
  const kept = what.answeredRequests;
  return kept === undefined ? what.reason : `${what.reason}\u0001${kept}`;
}

export async function settle(ctx: HandlerContext, req: z.output<typeof SettleRequest>) {
  const r = await closeReservation(ctx, req, {
    op: 'settle',
    usage: req.usage,
    outcome: req.outcome,
  });
  if (r.ok && r.value.status === 'settled') {
    await capacityClosed(ctx, req, r.value, 'settle', { usageTokens: r.value.billedTokens });
  }
  if (r.ok) {
    ctx.metrics.closes.inc({ op: 'settle', status: r.value.status });
    if (r.value.overrunTokens > 0 || r.value.overrunMicroUsd > 0) {
      ctx.metrics.overruns.inc();
      ctx.metrics.overrunTokens.inc(r.value.overrunTokens);
      ctx.logger.warn(
        {
          tenant: req.tenant,
          reservationId: req.reservationId,
          overrunTokens: r.value.overrunTokens,
          overrunMicroUsd: r.value.overrunMicroUsd,
        },
        'settlement billed more than its hold',
      );
    }
  }
  return withOwner(ctx, req, r);
}

export async function release(ctx: HandlerContext, req: ReleaseRequest) {
  const r = await closeReservation(ctx, req, {
    op: 'release',
    reason: req.reason,
    answeredRequests: req.answeredRequests,
  });
  if (r.ok) ctx.metrics.closes.inc({ op: 'release', status: r.value.status });
  if (r.ok && r.value.status === 'released') {
    // Attempts the provider answered with an error were requests its account counted: kept.
    const answered = req.answeredRequests;
    await capacityClosed(ctx, req, r.value, answered ? 'answered' : 'release', {
      requests: answered,
    });
  }
  return withOwner(ctx, req, r);
}

/** How long a response's owner is kept: as long as OpenAI keeps a stored response. */
export const RESPONSE_OWNER_TTL_MS = 30 * 86_400_000;

/**
 * How long a file's owner is kept: Anthropic keeps a file until it is deleted, so a year (a
 * file older than that is read as the operator's: any team may name it; docs/security.md).
 */
const FILE_OWNER_TTL_MS = 365 * 86_400_000;

/**
 * After a close (whatever it found: a late settle of an expired hold still made the response),
 * records the tenant as the owner of the response the upstream stored for the call and of the
 * output items stored with it, in the slot of the org its admits are checked in (admit.ts
 * `ownsResponse`), in one pipeline. Separate commands, not part of close.lua: it is not budget
 * state, and a failover that loses it only refuses the owner's continuation. When it fails the
 * close is answered `budget_store_unavailable`, so the edge sends it again (the close itself is
 * idempotent) and the owner is recorded then.
 */
async function withOwner(
  ctx: HandlerContext,
  req: {
    tenant: string;
    org?: string | undefined;
    responseId?: string | undefined;
    itemIds?: string[] | undefined;
  },
  result: Result<CloseResult, RpcError>,
): Promise<Result<CloseResult, RpcError>> {
  if (!result.ok) return result;
  // Where the call's capacity was is the authority's own business: not in the reply.
  const { capacityOn: _on, capacityMoving: _moving, ...reply } = result.value;
  const closed = Ok(reply);
  const named = [...(req.responseId === undefined ? [] : [req.responseId]), ...(req.itemIds ?? [])];
  if (named.length === 0) return closed;
  const org = ctx.config.current.tenants.get(req.tenant)?.org ?? req.org ?? req.tenant;
  // The org's stored state in its slot; the files a code execution output made in theirs (a
  // team of any org may name one).
  const ids = named.filter((id) => !firstOwned(id));
  const files = named.filter(firstOwned);
  for (const [keys, ttl, first] of [
    [ids.map((id) => ctx.keys.responseOwner(org, id)), RESPONSE_OWNER_TTL_MS, false],
    // A file's or sealed content's first owner stays: a later call reporting it (an upstream
    // that repeats an output) never hands it to another team.
    [files.map((id) => ctx.keys.fileOwner(id)), FILE_OWNER_TTL_MS, true],
  ] as const) {
    if (keys.length === 0) continue;
    const recorded = await recordOwner(ctx, keys, req.tenant, ttl, first);
    if (!recorded.ok) return recorded;
  }
  return closed;
}

/**
 * Sets each key (of one slot) to the owner tenant, durably, in one pipeline (`first`: only a
 * key not set yet).
 */
function recordOwner(
  ctx: HandlerContext,
  keys: string[],
  tenant: string,
  ttlMs: number,
  first: boolean,
) {
  const write = (p: ChainableCommander) => {
    for (const key of keys) {
      if (first) p.set(key, tenant, 'PX', String(ttlMs), 'NX');
      else p.set(key, tenant, 'PX', String(ttlMs));
    }
  };
  return withStore(ctx.logger, 'response owner', () =>
    durably(
      ctx.redis,
      async () => {
        const p = ctx.redis.pipeline();
        write(p);
        const failed = ((await p.exec()) ?? []).find(([err]) => err)?.[0];
        if (failed) throw failed;
      },
      write,
    ),
  );
}

/**
 * The upstream's capacity after the call: settled to usage where counted so, or released (the
 * requests the provider answered with an error kept: `answered`). The upstream the hold's
 * record says the call is on (`capacityOn`) over the one the edge names: an edge that timed out
 * on a move the authority made names the upstream the call left, and one naming another than
 * its admission's would give back a take the call does not hold. A move claimed and not
 * recorded (`capacityMoving`) has its fallback's take given back too.
 */
async function capacityClosed(
  ctx: HandlerContext,
  req: {
    reservationId: string;
    tenant: string;
    upstream?: string | undefined;
    model?: string | undefined;
  },
  on: Pick<CloseResult, 'capacityOn' | 'capacityMoving'>,
  how: 'settle' | 'release' | 'answered',
  amounts: { usageTokens?: number; requests?: number | undefined } = {},
): Promise<void> {
  const close = (upstream: string, as: 'settle' | 'release' | 'answered') =>
    closeCapacity(ctx, {
      reservationId: req.reservationId,
      tenant: req.tenant,
      upstream,
      model: req.model,
      how: as,
      usageTokens: amounts.usageTokens ?? 0,
      ...(as === 'answered' && amounts.requests ? { requests: amounts.requests } : {}),
    }).catch((err: unknown) => ctx.logger.warn({ err }, 'capacity not closed'));
  const upstream = on.capacityOn ?? req.upstream;
  if (on.capacityMoving) await close(on.capacityMoving, 'release');
  if (upstream) await close(upstream, how);
}
