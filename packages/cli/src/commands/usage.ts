import { CliError } from '../client.js';
import { context, parse, type Io } from '../context.js';
import { EXIT } from '../exit.js';
import { amount, table } from '../format.js';

interface Window {
  tenant: string;
  budget: string;
  unit: string;
  limit: number;
  used: number;
  held: number;
  enforce: boolean;
}
interface TenantBudgets {
  tenant: string;
  suspended: boolean;
  inFlight: number;
  windows: Window[];
}

/**
 * `holdfast usage [TENANT]`: every budget window from the authority's ledger (GET /v1/budgets
 * with the admin token): billed, held, limit, share used. An org's windows are listed once.
 */
export async function usage(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {});
  if (positionals.length > 1)
    throw new CliError(`unexpected argument "${positionals[1]}"`, EXIT.usage);
  const ctx = context(io, values);
  const only = positionals[0];
  const query = only === undefined ? '' : `?tenant=${encodeURIComponent(only)}`;
  const r = (await ctx.client().request('GET', `/v1/budgets${query}`)) as {
    time: string;
    tenants: TenantBudgets[];
  };
  const seen = new Set<string>();
  const rows: string[][] = [];
  for (const t of r.tenants) {
    for (const w of t.windows) {
      const id = `${w.tenant}/${w.budget}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const share = w.limit === 0 ? '-' : `${((w.used / w.limit) * 100).toFixed(1)}%`;
      const state = [w.enforce ? '' : 'shadow', w.used > w.limit ? 'over' : ''].filter(Boolean);
      rows.push([
        w.tenant,
        w.budget,
        amount(w.used, w.unit),
        amount(w.held, w.unit),
        amount(w.limit, w.unit),
        share,
        state.join(',') || '-',
      ]);
    }
  }
  const suspended = r.tenants.filter((t) => t.suspended).map((t) => t.tenant);
  ctx.print(
    r,
    `ledger at ${r.time}\n` +
      (rows.length === 0
        ? 'no budgets\n'
        : table(['TENANT', 'WINDOW', 'USED', 'HELD', 'LIMIT', 'USED%', 'STATE'], rows)) +
      (suspended.length > 0 ? `suspended: ${suspended.join(', ')}\n` : ''),
  );
  return EXIT.ok;
}
