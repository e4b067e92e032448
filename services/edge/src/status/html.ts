/** Escapes text for HTML content and attribute values. */
export function esc(value: string | number): string {
  return String(value).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

const tokens = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/**
 * Decimals for the dollar amounts of a window: cents for budgets of a dollar or more, and
 * enough digits below that for the amounts to differ (`$0.0298` of a `$0.0500` limit).
 */
export function usdDigits(limitMicro: number): number {
  const usd = limitMicro / 1_000_000;
  if (usd >= 1 || usd <= 0) return 2;
  return Math.min(6, Math.ceil(-Math.log10(usd)) + 2);
}

/** An amount in its unit: tokens as `38,176`, micro-USD as `$12.34` (`digits` decimals). */
export function amount(value: number, unit: 'tokens' | 'usd', digits = 2): string {
  if (unit === 'tokens') return tokens.format(value);
  const usd = (value / 1_000_000).toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
  return usd.startsWith('-') ? `-$${usd.slice(1)}` : `$${usd}`;
}

/** A percentage with one decimal, `95.4%`. */
export function percent(fraction: number): string {
  if (!Number.isFinite(fraction)) return '∞%';
  return `${(fraction * 100).toFixed(1)}%`;
}
