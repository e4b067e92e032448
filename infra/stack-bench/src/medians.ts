import { readFile } from 'node:fs/promises';
import { SCHEMA, upcast, type BenchResult } from './result.js';
import { median, type Summary } from './summary.js';
import { renderReport } from './table.js';

/**
 * The element-wise median of values of one shape: numbers by their median (NaN and null
 * left out), objects key by key, arrays index by index, anything else taken from the first.
 */
export function medianOf(values: readonly unknown[]): unknown {
  const present = values.filter((v) => v !== undefined);
  const first = present[0];
  if (present.every((v) => typeof v === 'number' || v === null)) {
    return median(present.filter((v): v is number => typeof v === 'number'));
  }
  if (Array.isArray(first)) {
    const arrays = present.filter(Array.isArray);
    const length = Math.max(...arrays.map((a) => a.length));
    return Array.from({ length }, (_, i) => medianOf(arrays.map((a) => a[i] as unknown)));
  }
  if (first !== null && typeof first === 'object') {
    const objects = present.filter(
      (v): v is Record<string, unknown> => v !== null && typeof v === 'object',
    );
    const keys = [...new Set(objects.flatMap((o) => Object.keys(o)))];
    return Object.fromEntries(keys.map((k) => [k, medianOf(objects.map((o) => o[k]))]));
  }
  return first;
}

/**
 * `--medians a.json,b.json,c.json`: the report of the medians over runs of the same flags and
 * schema (v1 runs, without the bare proxy, are read too, but not mixed with later ones: the
 * proxy's medians would be over only some of the runs).
 */
export async function renderMedians(paths: readonly string[]): Promise<string> {
  const read = await Promise.all(
    paths.map(async (p) => JSON.parse(await readFile(p, 'utf8')) as { schema?: unknown }),
  );
  const runs = read.map((r) => upcast(r) as BenchResult);
  const shape = (r: BenchResult, i: number) =>
    JSON.stringify([
      read[i]!.schema,
      r.flags.rounds,
      r.flags.seconds,
      r.flags.connections,
      r.flags.rates,
      r.flags.stream,
    ]);
  for (const [i, r] of runs.entries()) {
    if (r.schema !== SCHEMA) throw new Error(`${paths[i]} is not a bench:stack result`);
    if (shape(r, i) !== shape(runs[0]!, 0))
      throw new Error(`${paths[i]} ran with other flags or schema than ${paths[0]}`);
  }
  const summary = medianOf(runs.map((r) => r.summary)) as Summary;
  const header =
    `bench:stack: medians of ${runs.length} runs (${runs.map((r) => r.commit).join(', ')}; ` +
    `${runs[0]!.flags.rounds} rounds x ${runs[0]!.flags.seconds} s a phase each; load average ` +
    `at start ${runs.map((r) => r.loadAverage.toFixed(1)).join(' / ')})`;
  return renderReport(summary, header);
}
