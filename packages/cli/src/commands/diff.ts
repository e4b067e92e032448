import { CliError } from '../client.js';
import { context, parse, type Io } from '../context.js';
import { EXIT } from '../exit.js';
import { changeLines, listed, type ConfigChange } from './apply.js';

interface Stored {
  version: number;
  declared: { version: number; source: string; time: string } | null;
  divergence?: ConfigChange[];
  /** How many there are in all (the list has the first 500); absent from an older edge. */
  divergenceCount?: number;
}

/**
 * `holdfast diff`: what the admin API changed since the last declared document (the config
 * file, or `holdfast apply`). The next apply of a document keeps these where it leaves the
 * same fields alone; `holdfast apply --replace` drops them.
 */
export async function diff(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {});
  if (positionals.length > 0) {
    throw new CliError(`unexpected argument "${positionals[0]}"`, EXIT.usage);
  }
  const ctx = context(io, values);
  const r = (await ctx.client().request('GET', '/admin/config')) as Stored;
  const changes = r.divergence ?? [];
  const count = r.divergenceCount ?? changes.length;
  const { declared } = r;
  const head = declared
    ? `config version ${r.version}; last declared document: version ${declared.version}, ${declared.source}, ${declared.time}\n`
    : `config version ${r.version}; no declared document recorded: the next apply of a file applies it whole\n`;
  const body =
    changes.length === 0
      ? declared
        ? 'no changes made through the admin API since\n'
        : ''
      : `${count} change(s) made through the admin API since (the next apply keeps them unless the document changes the same fields; --replace drops them)${listed(changes, count)}:\n${changeLines(changes)}`;
  ctx.print(
    { version: r.version, declared, divergence: changes, divergenceCount: count },
    head + body,
  );
  return EXIT.ok;
}
