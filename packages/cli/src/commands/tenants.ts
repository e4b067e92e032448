import { CliError } from '../client.js';
import { context, parse, positional, type Io } from '../context.js';
import { EXIT } from '../exit.js';

/**
 * `holdfast suspend TENANT [--reason TEXT] [--grace-ms N]` and `holdfast resume TENANT`: new
 * calls of a suspended tenant get 403 tenant_suspended; calls in flight end after the grace.
 */
export async function suspension(
  op: 'suspend' | 'resume',
  args: string[],
  io: Io,
): Promise<number> {
  const { values, positionals } = parse(args, {
    reason: { type: 'string' },
    'grace-ms': { type: 'string' },
  });
  const ctx = context(io, values);
  const tenant = positional(positionals, 'TENANT');
  const grace = values['grace-ms'];
  if (grace !== undefined && !/^\d+$/.test(grace)) {
    throw new CliError('--grace-ms must be a number of milliseconds', EXIT.usage);
  }
  if (op === 'resume' && (values.reason !== undefined || grace !== undefined)) {
    throw new CliError('resume takes no --reason or --grace-ms', EXIT.usage);
  }
  const body =
    op === 'suspend'
      ? {
          ...(values.reason ? { reason: values.reason } : {}),
          ...(grace ? { graceMs: Number(grace) } : {}),
        }
      : {};
  const r = (await ctx
    .client()
    .request('POST', `/admin/tenants/${encodeURIComponent(tenant)}/${op}`, { json: body })) as {
    data: { tenant: string; suspended: boolean; changed: boolean };
  };
  const state = r.data.suspended ? 'suspended' : 'active';
  ctx.print(
    r.data,
    r.data.changed ? `${tenant} is now ${state}\n` : `${tenant} was already ${state}\n`,
  );
  return EXIT.ok;
}
