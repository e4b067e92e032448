import type { WindowState } from '@holdfast/events';

/** Parses the scripts' window list: `tenant,budget,limit,used,held,enforce;...`. */
export function parseWindows(text: string): WindowState[] {
  if (!text) return [];
  return text.split(';').map((entry) => {
    const [
      tenant = '',
      budget = '',
      limit = '0',
      used = '0',
      held = '0',
      enforce = '1',
      scope,
      subject,
    ] = entry.split(',');
    const [window, unit] = budget.split('-') as [WindowState['window'], WindowState['unit']];
    const state: WindowState = {
      tenant,
      budget: budget,
      window,
      unit,
      limit: Number(limit),
      used: Number(used),
      held: Number(held),
      enforce: enforce === '1',
    };
    // A key's or an end user's window (the scripts add `k,<key>` or `u,<end user>`).
    if ((scope === 'k' || scope === 'u') && subject) {
      state.scope = scope === 'k' ? 'key' : 'end_user';
      state.subject = subject;
    }
    return state;
  });
}
