import { formatUsd } from '@holdfast/events';

/** Left-aligned columns, two spaces apart, with a header row. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** Tokens as `38,176`; micro-USD as dollars with every micro-dollar (`$0.001234`, `$2.50`). */
export function amount(value: number, unit: string): string {
  return unit === 'usd' ? formatUsd(value) : value.toLocaleString('en-US');
}
