import type { WindowState } from '@holdfast/events';

/** Parses the scripts' window list: `tenant,budget,limit,used,held,enforce;...`. */
export function parseWindows(text: string): WindowState[] {
  if (!text) return [];
  return text.split(';').map((entry) => {
    const [tenant = '', budget = '', limit = '0', used = '0', held = '0', enforce = '1'] =
      entry.split(',');
    const [window, unit] = budget.split('-') as [WindowState['window'], WindowState['unit']];
    return {
      tenant,
      budget: budget,
      window,
      unit,
      limit: Number(limit),
      used: Number(used),
      held: Number(held),
      enforce: enforce === '1',
    };
  });
}
