import { parseConfig } from '@holdfast/config';
import { CliError } from '../client.js';
import { context, parse, positional, type Io } from '../context.js';
import { EXIT } from '../exit.js';

interface Applied {
  version: number;
  hash: string;
  changed: boolean;
}

/**
 * `holdfast apply FILE [--expected-version N] [--dry-run]`: validates the file with the same
 * schema the authority uses (every bad field named, nothing sent), then PUT /admin/config.
 */
export async function apply(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {
    'expected-version': { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
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
      `${file}: invalid config (nothing applied):\n${parsed.errors.map((e) => `  ${e}\n`).join('')}`,
    );
    return EXIT.invalid;
  }
  const { tenants, models } = parsed.config;
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
  const query = expected === undefined ? '' : `?expectedVersion=${expected}`;
  const r = (await ctx.client().request('PUT', `/admin/config${query}`, { yaml: text })) as Applied;
  ctx.print(
    r,
    r.changed
      ? `applied ${file}: config version ${r.version} (${tenants.size} tenants, sha256 ${r.hash.slice(0, 12)})\n`
      : `unchanged: ${file} is already config version ${r.version}\n`,
  );
  return EXIT.ok;
}
