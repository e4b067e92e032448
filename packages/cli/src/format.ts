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

/** Tokens as `38,176`; micro-USD as `$12.34` (`$0.0012` under a dollar). */
export function amount(value: number, unit: string): string {
  if (unit !== 'usd') return value.toLocaleString('en-US');
  const usd = value / 1_000_000;
  const digits = Math.abs(usd) >= 1 || usd === 0 ? 2 : 4;
  return `$${usd.toFixed(digits)}`;
}
