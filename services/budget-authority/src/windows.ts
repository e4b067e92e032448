import type { WindowState } from '@holdfast/events';

/**
 * Parses the scripts' window list: `tenant,budget,limit,used,held,enforce;...`, a key's or
 * end user's window followed by `k,<key>` or `u,<end user>`, a window a close charged
 * otherwise than its event by `c,<charged>`, and a window of the hold's record that the plan
 * no longer has by `r` (lib.lua's withRemoved: close.lua, extend.lua).
 */
export function parseWindows(text: string): WindowState[] {
  if (!text) return [];
  const entries = text.split(';');
  const out = new Array<WindowState>(entries.length);
  for (let i = 0; i < entries.length; i++) out[i] = parseWindow(entries[i]!.split(','));
  return out;
}

/**
 * One window's fields. Read field by field, without destructuring with defaults or a split
 * of the budget id (issue 14: three windows a reply and an event, several times a call); a
 * unit test holds it to the reading before, key for key (windows-parse.unit.test.ts).
 */
function parseWindow(fields: string[]): WindowState {
  const budget = fields[1] ?? '';
  // `<window>-<unit>`: what lies before the first dash and between it and the next one.
  const dash = budget.indexOf('-');
  const next = dash < 0 ? -1 : budget.indexOf('-', dash + 1);
  const state: WindowState = {
    tenant: fields[0] ?? '',
    budget,
    window: (dash < 0 ? budget : budget.slice(0, dash)) as WindowState['window'],
    unit: (dash < 0
      ? undefined
      : budget.slice(dash + 1, next < 0 ? undefined : next)) as WindowState['unit'],
    limit: Number(fields[2] ?? '0'),
    used: Number(fields[3] ?? '0'),
    held: Number(fields[4] ?? '0'),
    enforce: (fields[5] ?? '1') === '1',
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
}
