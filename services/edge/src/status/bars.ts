import { utilisation } from '@holdfast/events';
import { amount, esc, percent, usdDigits } from './html.js';
import type { BudgetsView, TenantView, WindowView } from './view.js';

/**
 * Where the parts of a bar go, in percent of the track. The track runs to 125% of the limit,
 * or further when usage does, so the limit marker always shows and a bar past it reads as
 * over at a glance.
 */
export interface BarGeometry {
  usedPct: number;
  heldPct: number;
  limitPct: number;
  softPct: number[];
}

const round = (x: number) => Math.round(x * 100) / 100;

export function barGeometry(w: Pick<WindowView, 'used' | 'held' | 'limit' | 'soft'>): BarGeometry {
  const used = Math.max(0, w.used);
  const scale = Math.max(w.limit * 1.25, used + w.held, 1);
  return {
    usedPct: round((used / scale) * 100),
    heldPct: round((w.held / scale) * 100),
    limitPct: round((w.limit / scale) * 100),
    softPct: w.soft.map((s) => round(((s * w.limit) / scale) * 100)),
  };
}

/** `ok` below the first soft threshold, `warn` from it, `over` past the limit. */
export function level(w: Pick<WindowView, 'used' | 'limit' | 'soft'>): 'ok' | 'warn' | 'over' {
  const u = utilisation(w);
  if (u > 1) return 'over';
  const first = w.soft[0] ?? 0.8;
  return u >= first || u === 1 ? 'warn' : 'ok';
}

function bar(w: WindowView): string {
  const g = barGeometry(w);
  const u = utilisation(w);
  const digits = usdDigits(w.limit);
  const fmt = (v: number) => amount(v, w.unit, digits);
  const over = w.used - w.limit;
  const label = `${w.window} · ${w.unit}`;
  const marks = w.soft
    .map(
      (s, i) =>
        `<i class="mark soft" style="left:${g.softPct[i] ?? 0}%" title="soft threshold ${percent(s)}"><span>${Math.round(s * 100)}%</span></i>`,
    )
    .join('');
  const tail = over > 0 ? `<em class="over">over by ${fmt(over)}</em>` : `${fmt(w.remaining)} left`;
  return `<div class="row" data-tenant="${esc(w.tenant)}" data-budget="${esc(w.budget)}" data-used="${w.used}" data-held="${w.held}" data-limit="${w.limit}" data-level="${level(w)}">
<div class="label">${label}${w.enforce ? '' : ' <span class="badge">shadow</span>'}</div>
<div class="track" role="img" aria-label="${esc(`${w.budget}: ${fmt(w.used)} used, ${fmt(w.held)} held, limit ${fmt(w.limit)}`)}">
<b class="seg used" style="width:${g.usedPct}%"></b><b class="seg held" style="left:${g.usedPct}%;width:${g.heldPct}%"></b>${marks}<i class="mark limit" style="left:${g.limitPct}%" title="limit"><span>limit</span></i>
</div>
<div class="nums"><b class="pct">${percent(u)}</b> <span class="used-n">${fmt(w.used)}</span> used + <span class="held-n">${fmt(w.held)}</span> held of <span class="limit-n">${fmt(w.limit)}</span> · ${tail}</div>
</div>`;
}

interface Section {
  tenant: string;
  info: TenantView | undefined;
  windows: WindowView[];
}

/**
 * One section per budget owner, in the order they first appear: a team, and the org above it
 * once (a team's view repeats its org's windows; they are shown in the org's section).
 */
export function sections(view: BudgetsView): Section[] {
  const byOwner = new Map<string, Section>();
  const seen = new Set<string>();
  const section = (tenant: string) => {
    let s = byOwner.get(tenant);
    if (!s) {
      s = { tenant, info: view.tenants.find((t) => t.tenant === tenant), windows: [] };
      byOwner.set(tenant, s);
    }
    return s;
  };
  for (const t of view.tenants) {
    section(t.tenant);
    for (const w of t.windows) {
      const id = `${w.tenant}/${w.budget}`;
      if (seen.has(id)) continue;
      seen.add(id);
      section(w.tenant).windows.push(w);
    }
  }
  return [...byOwner.values()];
}

function badges(t: TenantView | undefined, teams: number): string {
  if (!t) return '<span class="badge">above your team</span>';
  const out = [`<span class="badge">${esc(t.mode)}</span>`];
  if (teams > 0) out.push(`<span class="badge">org of ${teams}</span>`);
  if (t.parent) out.push(`<span class="badge">in ${esc(t.parent)}</span>`);
  const cap = t.maxInFlight === null ? '' : `/${t.maxInFlight}`;
  out.push(`<span class="badge inflight">${t.inFlight}${cap} in flight</span>`);
  if (t.suspended) {
    const by = t.suspendedBy.length > 0 ? ` by ${t.suspendedBy.map(esc).join(' and ')}` : '';
    out.push(`<span class="badge suspended">suspended${by}</span>`);
  }
  const o = t.overruns;
  if (o.count > 0) {
    // A settlement billed more than its hold: the counting or the upstream let it through.
    const last = o.lastAt ? `, last ${esc(o.lastAt.slice(0, 16).replace('T', ' '))} UTC` : '';
    const title = `${o.count} settlement${o.count === 1 ? '' : 's'} billed ${o.tokens.toLocaleString('en-US')} tokens above their holds${last}`;
    out.push(
      `<span class="badge overrun" title="${title}">${o.count} overrun${o.count === 1 ? '' : 's'}</span>`,
    );
  }
  return out.join(' ');
}

/**
 * One bar per declared upstream capacity: tokens the last minute used of it (or, where an
 * upstream declares only its counting limit, counts), with its requests and counts beside.
 */
function capacityBars(view: BudgetsView): string {
  if (view.capacity.length === 0) return '';
  const rows = view.capacity.map((c) => {
    const n = (x: number) => x.toLocaleString('en-US');
    const onlyCounts =
      c.tokensPerMinute === null && c.requestsPerMinute === null && c.countsPerMinute !== null;
    const [used, limit, unit] = onlyCounts
      ? [c.counts, c.countsPerMinute ?? 0, 'counts']
      : [c.tokens, c.tokensPerMinute ?? 0, 'tokens'];
    const pct = limit > 0 ? Math.min(100, (used / limit) * 100) : 0;
    const name = c.model === null ? c.upstream : `${c.upstream} / ${c.model}`;
    const blocked = c.blockedUntil
      ? ` <span class="badge suspended">provider 429 until ${esc(c.blockedUntil.slice(11, 19))} UTC</span>`
      : '';
    const more = onlyCounts
      ? ''
      : ` · ${n(c.requests)} requests` +
        (c.countsPerMinute === null ? '' : ` · ${n(c.counts)} of ${n(c.countsPerMinute)} counts`);
    return `<div class="row" data-upstream="${esc(name)}" data-used="${used}" data-limit="${limit}">
<div class="track" role="img" aria-label="${esc(`${name}: ${used} of ${limit} ${unit} a minute`)}"><b class="seg used" style="width:${pct.toFixed(1)}%"></b></div>
<div class="nums"><b>${esc(name)}</b> ${n(used)} of ${n(limit)} ${unit} in the last minute${more}${blocked}</div>
</div>`;
  });
  return `<section class="capacity"><h2>Upstream capacity</h2>\n${rows.join('\n')}\n</section>\n`;
}

/** The bars of every section: the part of the page that refreshes. */
export function renderBars(view: BudgetsView): string {
  const all = sections(view);
  if (all.length === 0) return '<p class="empty">No tenants are configured.</p>';
  return (
    capacityBars(view) +
    all
      .map((s) => {
        const rows =
          s.windows.length === 0
            ? '<p class="empty">No budgets.</p>'
            : s.windows.map(bar).join('\n');
        return `<section class="tenant" data-tenant="${esc(s.tenant)}"${s.info?.suspended ? ' data-suspended="true"' : ''}>
<h2>${esc(s.tenant)} ${badges(s.info, view.tenants.filter((t) => t.parent === s.tenant).length)}</h2>
${rows}
</section>`;
      })
      .join('\n')
  );
}
