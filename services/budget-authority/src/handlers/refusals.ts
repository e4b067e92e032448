import type { RefusalsReportRequest } from '@holdfast/events';
import { Ok, type Result, type RpcError } from '@holdfast/runtime';
import { z } from 'zod';
import type { HandlerContext } from '../context.js';
import { runRefuse } from '../scripts.js';
import { withStore } from '../store-error.js';

/** An admission.refused event's fields as admit.lua lists them: names and values, flat. */
const EventFields = z.array(z.string().max(8_192)).min(2).max(128);

/** The refusals an edge may answer again itself (admit.lua and admit.ts return their summary). */
const REMEMBERED = new Set([
  'budget_exceeded',
  'concurrency_limit',
  'tenant_suspended',
  'use_case_not_registered',
  'model_not_allowed',
  'end_user_limit',
]);

/**
 * The item's event fields, when they are a refusal of its tenant the edge may remember, as
 * admit.lua (`refuse`) or admit.ts (`recordRefusal`) made it (the kind starts with the tenant
 * and the code); undefined otherwise. Edges are trusted, but what
 * lands in the outbox is checked where it is written.
 */
function refusalFields(item: RefusalsReportRequest['items'][number]): string[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(item.fields);
  } catch {
    return undefined;
  }
  const list = EventFields.safeParse(parsed);
  if (!list.success || list.data.length % 2 !== 0) return undefined;
  const fields = list.data;
  const value = (name: string) => {
    for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
    return undefined;
  };
  const code = value('code') ?? '';
  const own =
    value('type') === 'admission.refused' &&
    value('tenant') === item.tenant &&
    REMEMBERED.has(code) &&
    item.kind.startsWith(`${item.tenant}|${code}|`) &&
    value('shadow') === '0';
  return own ? fields : undefined;
}

/**
 * Counts the refusals an edge answered itself into the org's refusal summaries (refuse.lua with
 * a `count`): the sweeper writes each kind as one `admission.refused` event with its count, as
 * it does for the refusals past a tenant's event rate. Returns how many items were counted. An
 * item goes to its tenant's current org, or, for a tenant removed from the config since the
 * edge refused (an admin change racing the report), to the org the edge names, so its refusals
 * still end in events; one whose fields are not its tenant's own refusal, or of an unknown
 * tenant with no org, is dropped (and logged), never written.
 */
export async function reportRefusals(
  ctx: HandlerContext,
  req: RefusalsReportRequest,
): Promise<Result<{ recorded: number }, RpcError>> {
  let recorded = 0;
  for (const item of req.items) {
    const org = ctx.config.current.tenants.get(item.tenant)?.org ?? item.org;
    const fields = org === undefined ? undefined : refusalFields(item);
    if (org === undefined || !fields) {
      ctx.logger.warn({ tenant: item.tenant, count: item.count }, 'refusal report item dropped');
      continue;
    }
    const now = ctx.scriptNow();
    const spec = JSON.stringify({
      kind: item.kind,
      fields,
      count: item.count,
      ...(now === undefined ? {} : { now }),
    });
    const keys = [
      ctx.keys.outbox(org),
      ctx.keys.state(org, item.tenant),
      ctx.keys.refusals(org),
      ctx.keys.refusalReport(org, item.id),
    ];
    const ran = await withStore(ctx.logger, 'refusals.report', () =>
      runRefuse(ctx.redis, keys, spec),
    );
    if (!ran.ok) return ran;
    // 1: counted now; 0: a retried report's item, counted before.
    if (ran.value === 1) ctx.metrics.refusalsReported.inc(item.count);
    recorded++;
  }
  return Ok({ recorded });
}
