import { parseConfig } from '@holdfast/config';
import { CliError } from '../client.js';
import { context, parse, positional, type Io } from '../context.js';
import { EXIT } from '../exit.js';

export interface ConfigChange {
  path: string;
  change: 'added' | 'changed' | 'removed';
}

interface Applied {
  version: number;
  hash: string;
  changed: boolean;
  /** Absent from an edge older than the merge. */
  kept?: ConfigChange[];
  overridden?: ConfigChange[];
  /** How many each list has in all (each lists the first 500); absent from an older edge. */
  keptCount?: number;
  overriddenCount?: number;
}

/** `, the first N listed` when a list is shorter than the count it stands for. */
export function listed(changes: readonly ConfigChange[], count: number): string {
  return changes.length < count ? `, the first ${changes.length} listed` : '';
}

/** One line per change: `  + tenants[id=support-bot].keys[id=ops-1]`. */
export function changeLines(changes: readonly ConfigChange[]): string {
  const mark = { added: '+', changed: '~', removed: '-' } as const;
  return changes.map((c) => `  ${mark[c.change]} ${c.path} (${c.change})\n`).join('');
}

/**
 * `holdfast apply FILE [--replace] [--expected-version N] [--dry-run]`: validates the file with
 * the same schema the authority uses (every bad field named, nothing sent), then PUT
 * /admin/config. The file is merged: what the admin API changed and the file leaves alone is
 * kept, and both lists are printed; --replace makes the stored config exactly the file.
 */
export async function apply(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {
    'expected-version': { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
    replace: { type: 'boolean', default: false },
  });
  const ctx = context(io, values);
  const file = positional(positionals, 'FILE');
  let text: string;
  try {
    text = await io.readFile(file);
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`, EXIT.invalid);
  }
  const parsed = parseConfig(text);
  if (!parsed.ok) {
    io.stderr(
      `${file}: invalid config (nothing applied):\n${parsed.error.errors.map((e) => `  ${e}\n`).join('')}`,
    );
    return EXIT.invalid;
  }
  const { tenants, models } = parsed.value;
  if (values['dry-run']) {
    ctx.print(
      { valid: true, tenants: tenants.size, models: models.size },
      `${file} is valid: ${tenants.size} tenants, ${models.size} models\n`,
    );
    return EXIT.ok;
  }
  const expected = values['expected-version'];
  if (expected !== undefined && !/^\d+$/.test(expected)) {
    throw new CliError('--expected-version must be a config version (0, 1, 2, ...)', EXIT.usage);
  }
  const query = new URLSearchParams({
    ...(expected === undefined ? {} : { expectedVersion: expected }),
    ...(values.replace ? { mode: 'replace' } : {}),
  }).toString();
  const path = `/admin/config${query ? `?${query}` : ''}`;
  const reply = (await ctx.client().request('PUT', path, { yaml: text })) as Applied;
  const r = { ...reply, kept: reply.kept ?? [], overridden: reply.overridden ?? [] };
  const keptCount = reply.keptCount ?? r.kept.length;
  const overriddenCount = reply.overriddenCount ?? r.overridden.length;
  const head = r.changed
    ? `applied ${file}: config version ${r.version} (${tenants.size} tenants in the file, sha256 ${r.hash.slice(0, 12)})\n`
    : `unchanged: ${file} makes no change to config version ${r.version}\n`;
  const kept =
    keptCount > 0
      ? `kept ${keptCount} change(s) made through the admin API that the file leaves alone${listed(r.kept, keptCount)}:\n${changeLines(r.kept)}`
      : '';
  const overridden =
    overriddenCount > 0
      ? `${values.replace ? 'dropped' : 'overrode'} ${overriddenCount} change(s) made through the admin API${listed(r.overridden, overriddenCount)}:\n${changeLines(r.overridden)}`
      : '';
  ctx.print(r, head + kept + overridden);
  return EXIT.ok;
}
