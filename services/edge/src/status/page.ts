import { renderBars } from './bars.js';
import { esc } from './html.js';
import type { BudgetsView } from './view.js';
import type { Viewer } from './viewer.js';

/** Inline, no external assets: the page must work on a closed network and without a build. */
const CSS = `
:root{color-scheme:dark;--bg:#0e1116;--panel:#161b22;--track:#262d37;--text:#e6e9ee;--muted:#8d97a6;--ok:#3fb27f;--warn:#e3a32b;--over:#e5484d}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;background:var(--bg);color:var(--text)}
header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.4rem 1.2rem;padding:1rem 1.5rem;border-bottom:1px solid #232a33}
h1{font-size:1.15rem;margin:0}
.scope,.live{color:var(--muted)}
.live::before{content:"\\25CF";margin-right:.35em;color:var(--muted)}
.live.on::before{color:var(--ok)}.live.off::before{color:var(--over)}
header form{margin-left:auto}
button{font:inherit;color:var(--text);background:#2a313b;border:1px solid #3a424e;border-radius:6px;padding:.3rem .8rem;cursor:pointer}
main{padding:1rem 1.5rem;display:grid;gap:1rem;max-width:1180px}
section.tenant{background:var(--panel);border:1px solid #222932;border-radius:8px;padding:.8rem 1rem .6rem}
section.tenant[data-suspended]{border-color:#6b2326}
h2{font-size:1rem;margin:0 0 .3rem;display:flex;flex-wrap:wrap;gap:.45rem;align-items:center}
.badge{font-size:.72rem;font-weight:500;padding:.08em .55em;border-radius:999px;background:#28303a;color:var(--muted)}
.badge.suspended{background:#5b1d20;color:#ffb4b6}
.badge.overrun{background:#5b4a14;color:#ffe08a}
.row{display:grid;grid-template-columns:7.5rem minmax(12rem,1fr) 27rem;gap:1rem;align-items:center;padding:1.1rem 0 1.05rem}
.label{color:var(--muted)}
.track{position:relative;height:18px;background:var(--track);border-radius:4px}
.seg{position:absolute;top:0;bottom:0;display:block}
.used{left:0;background:var(--ok);border-radius:4px 0 0 4px}
.row[data-level=warn] .used{background:var(--warn)}
.row[data-level=over] .used{background:var(--over)}
.held{background:repeating-linear-gradient(135deg,rgba(230,233,238,.55) 0 4px,rgba(230,233,238,.2) 4px 8px)}
.mark{position:absolute;top:-4px;bottom:-4px;width:0;border-left:1px dashed #a3adba}
.mark span{position:absolute;top:-1.35em;transform:translateX(-50%);font-size:.68rem;font-style:normal;color:var(--muted);white-space:nowrap}
.mark.limit{top:-6px;bottom:-6px;border-left:2px solid #fff}
.mark.limit span{top:auto;bottom:-1.45em;color:var(--text)}
.nums{font-variant-numeric:tabular-nums;color:var(--muted);font-size:.84rem}
.nums b{color:var(--text)}
.row[data-level=over] .pct,.over{color:#ff8589;font-style:normal}
.empty{color:var(--muted);margin:.4rem 0}
footer{padding:0 1.5rem 1.5rem;color:var(--muted);font-size:.8rem;display:flex;gap:1.2rem;flex-wrap:wrap}
.key{display:inline-block;width:1.2em;height:.8em;vertical-align:middle;margin-right:.35em;border-radius:2px}
.login{display:grid;place-items:center;min-height:80vh}
.login form{background:var(--panel);padding:1.5rem;border-radius:8px;display:grid;gap:.8rem;width:min(26rem,92vw)}
.login input{font:inherit;width:100%;padding:.45rem;border-radius:6px;border:1px solid #3a424e;background:#0e1116;color:var(--text)}
.error{color:#ff8589}
@media (max-width:760px){.row{grid-template-columns:1fr}}
`;

/**
 * Polls the bars (server-rendered, so the page has one renderer) and swaps them in; no page
 * reload. A 401 means the session ended; other failures keep the last bars and retry.
 */
const SCRIPT = `
(() => {
  const root = document.getElementById('budgets');
  const live = document.getElementById('live');
  const every = Number(root.dataset.refreshMs) || 2000;
  const show = (text, on) => { live.textContent = text; live.className = 'live ' + (on ? 'on' : 'off'); };
  async function tick() {
    try {
      const r = await fetch('/budgets/bars', { credentials: 'same-origin', cache: 'no-store' });
      if (r.status === 401) return show('signed out: reload the page to sign in', false);
      if (!r.ok) throw new Error('HTTP ' + r.status);
      const html = await r.text();
      const time = r.headers.get('x-holdfast-ledger-time') || '';
      if (html !== root.innerHTML) root.innerHTML = html;
      root.dataset.time = time;
      show('live · ledger at ' + new Date(time).toLocaleTimeString(), true);
    } catch (err) {
      show('offline (' + err.message + '): retrying', false);
    }
    setTimeout(tick, every);
  }
  show('live · ledger at ' + new Date(root.dataset.time).toLocaleTimeString(), true);
  setTimeout(tick, every);
})();
`;

function scopeText(viewer: Viewer, view: BudgetsView): string {
  switch (viewer.kind) {
    case 'admin':
      return `all tenants (admin) · ${view.tenants.length} tenants`;
    case 'public':
      return `all tenants · ${view.tenants.length} tenants`;
    case 'tenant':
      return `team ${esc(viewer.tenant)} and the levels above it`;
  }
}

function document(title: string, body: string, head = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
${head}<style>${CSS}</style>
</head>
<body>
${body}
</body>
</html>
`;
}

const LEGEND = `<footer>
<span><i class="key" style="background:var(--ok)"></i>billed (used)</span>
<span><i class="key" style="background:var(--warn)"></i>past a soft threshold</span>
<span><i class="key" style="background:var(--over)"></i>over the limit</span>
<span><i class="key held"></i>held by calls in flight</span>
<span><i class="key" style="border-left:1px dashed #a3adba;border-radius:0"></i>soft threshold</span>
<span><i class="key" style="border-left:2px solid #fff;border-radius:0"></i>limit</span>
</footer>`;

export interface PageOptions {
  viewer: Viewer;
  /** Offer "sign out" (the viewer came in with the session cookie). */
  session: boolean;
  refreshMs: number;
  /** Nonce of the inline script (Content-Security-Policy). */
  nonce: string;
}

/** The whole status page, rendered on the server: it reads the same without JavaScript. */
export function renderPage(view: BudgetsView, o: PageOptions): string {
  const time = esc(view.time);
  const signOut = o.session
    ? '<form method="post" action="/budgets/session/end"><button>Sign out</button></form>'
    : '';
  const noscriptRefresh = `<noscript><meta http-equiv="refresh" content="${Math.max(5, Math.ceil(o.refreshMs / 1000))}"></noscript>\n`;
  return document(
    'Holdfast budgets',
    `<header><h1>Holdfast budgets</h1><span class="scope">${scopeText(o.viewer, view)}</span><span id="live" class="live">ledger at ${time}</span>${signOut}</header>
<main id="budgets" data-refresh-ms="${o.refreshMs}" data-time="${time}">
${renderBars(view)}
</main>
${LEGEND}
<script nonce="${esc(o.nonce)}">${SCRIPT}</script>`,
    noscriptRefresh,
  );
}

/** The sign-in form: an admin token (every tenant) or a virtual key (its own tenant). */
export function renderSignIn(message: string | undefined, csrf: string): string {
  const note = message ? `<p class="error">${esc(message)}</p>` : '';
  return document(
    'Holdfast budgets: sign in',
    `<main class="login"><form method="post" action="/budgets/session">
<h1>Holdfast budgets</h1>
<p class="scope">Sign in with the admin token to see every tenant, or with a virtual key to see its own team.</p>
${note}<input type="hidden" name="csrf" value="${esc(csrf)}">
<label>Admin token or virtual key<br><input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">Show budgets</button>
</form></main>`,
  );
}
