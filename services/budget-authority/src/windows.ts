import type { WindowState } from '@holdfast/events';

/**
 * Parses the scripts' window list: `tenant,budget,limit,used,held,enforce;...`, a key's or
 * end user's window followed by `k,<key>` or `u,<end user>`, a window a close charged
 * otherwise than its event by `c,<charged>`, and a window of the hold's record that the plan
 * no longer has by `r` (lib.lua's withRemoved: close.lua, extend.lua).
 */
export function parseWindows(text: string): WindowState[] {
  if (!text) return [];
  return text.split(';').map((entry) => {
    const fields = entry.split(',');
    const [tenant = '', budget = '', limit = '0', used = '0', held = '0', enforce = '1'] = fields;
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
    let at = 6;
    const scope = fields[at];
    const subject = fields[at + 1];
    // A key's or an end user's window (the scripts add `k,<key>` or `u,<end user>`).
    if (scope === 'k' || scope === 'u') {
      if (subject) {
        state.scope = scope === 'k' ? 'key' : 'end_user';
        state.subject = subject;
      }
      at += 2;
    }
    if (fields[at] === 'c') {
      state.charged = Number(fields[at + 1]);
      at += 2;
    }
    if (fields[at] === 'r') state.removed = true;
    return state;
  });
}
