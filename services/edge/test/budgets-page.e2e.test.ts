import type { TenantUsage } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import type { Page } from 'playwright-core';
import { expect, onTestFinished } from 'vitest';
import { ADMIN_TOKEN, withAdmin } from './admin.js';
import { launchChromium, type ShownBar } from './browser.js';
import { chat, edgeTest as test, KEYS, type Stack } from './harness.js';

/** Every bar on the page: its data, its numbers as text, and where its parts are drawn. */
function readBars(page: Page): Promise<ShownBar[]> {
  return page.$$eval('.row', (rows) =>
    rows.map((row) => {
      const el = row as HTMLElement;
      const box = (sel: string) => el.querySelector(sel)!.getBoundingClientRect();
      const track = box('.track');
      const text = (sel: string) => el.querySelector(sel)!.textContent ?? '';
      return {
        tenant: el.dataset.tenant!,
        budget: el.dataset.budget!,
        used: Number(el.dataset.used),
        held: Number(el.dataset.held),
        limit: Number(el.dataset.limit),
        level: el.dataset.level!,
        usedText: text('.used-n'),
        heldText: text('.held-n'),
        limitText: text('.limit-n'),
        usedPx: box('.used').width,
        heldPx: box('.held').width,
        heldLeftPx: box('.held').left - track.left,
        limitLeftPx: box('.mark.limit').left - track.left,
        softLeftPx: [...el.querySelectorAll('.mark.soft')].map(
          (m) => m.getBoundingClientRect().left - track.left,
        ),
      };
    }),
  );
}

/** The ledger's windows, one per budget owner (a team's view repeats its org's). */
function ledgerWindows(usage: TenantUsage[]) {
  const seen = new Map<string, TenantUsage['windows'][number] & { soft: number[] }>();
  for (const t of usage)
    for (const w of t.windows)
      seen.set(`${w.tenant}/${w.budget}`, { ...w, soft: t.thresholds[`${w.tenant}/${w.budget}`]! });
  return seen;
}

async function allUsage(s: Stack): Promise<TenantUsage[]> {
  const r = await s.client.usage({});
  if (!r.ok) throw new Error(r.error.message);
  return r.value.tenants;
}

const tokens = (n: number) => n.toLocaleString('en-US');

/** Each bar shows the ledger: its numbers, and lengths in proportion to its limit marker. */
function expectBarsMatch(bars: ShownBar[], usage: TenantUsage[]): void {
  const ledger = ledgerWindows(usage);
  expect(bars.map((b) => `${b.tenant}/${b.budget}`).sort()).toEqual([...ledger.keys()].sort());
  for (const bar of bars) {
    const w = ledger.get(`${bar.tenant}/${bar.budget}`)!;
    expect({ used: bar.used, held: bar.held, limit: bar.limit }).toEqual({
      used: w.used,
      held: w.held,
      limit: w.limit,
    });
    if (w.unit === 'tokens') {
      expect([bar.usedText, bar.heldText, bar.limitText]).toEqual([
        tokens(w.used),
        tokens(w.held),
        tokens(w.limit),
      ]);
    }
    // Scale-free: used / limit on the ledger is used width / limit-marker offset on screen.
    expect(bar.usedPx).toBeCloseTo((w.used / w.limit) * bar.limitLeftPx, 0);
    expect(bar.heldPx).toBeCloseTo((w.held / w.limit) * bar.limitLeftPx, 0);
    expect(bar.heldLeftPx).toBeCloseTo(bar.usedPx, 0);
    w.soft.forEach((s, i) => expect(bar.softLeftPx[i]).toBeCloseTo(s * bar.limitLeftPx, 0));
  }
}

test('the status page in Chromium: sign in, bars match the ledger, live updates, works without JS', async ({
  stack,
}) => {
  const s = await stack(
    withAdmin({
      patch: (c) => {
        c.tenants.find((t) => t.id === 'finance-ops')!.mode = 'post';
      },
      behaviour: { completion: { mode: 'fixed', tokens: 400 } },
      edge: { options: { statusRefreshMs: 100 } },
    }),
  );
  // Some history: batch-summariser past its first soft threshold, finance-ops over its limit.
  const batch = s.openai(KEYS.batch);
  for (let i = 0; i < 4; i++) await batch.chat.completions.create(chat(370, { max_tokens: 1_024 }));
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 512 } });
  for (let i = 0; i < 3; i++) await batch.chat.completions.create(chat(370, { max_tokens: 1_024 }));
  for (let i = 0; i < 23; i++)
    await s.openai(KEYS.finance).chat.completions.create(chat(370, { max_tokens: 512 }));
  await s.settled('finance-ops');

  const chromium = await launchChromium();
  onTestFinished(() => chromium.close());
  const page = await chromium.context.newPage();

  // Not signed in: the form. Sign in with the admin token.
  const first = await page.goto(`${s.edge.url}/budgets`);
  expect(first?.status()).toBe(401);
  await page.fill('input[name=token]', ADMIN_TOKEN);
  await Promise.all([page.waitForURL(`${s.edge.url}/budgets`), page.click('button[type=submit]')]);
  expect(await page.title()).toBe('Holdfast budgets');
  expectBarsMatch(await readBars(page), await allUsage(s));
  const levels = Object.fromEntries(
    (await readBars(page)).map((b) => [`${b.tenant}/${b.budget}`, b.level]),
  );
  expect(levels).toMatchObject({
    'finance-ops/month-tokens': 'over',
    'support-bot/month-tokens': 'ok',
  });

  // Live: a call in flight shows as held, then as used once it settles, with no reload.
  await page.evaluate(() => ((window as unknown as { unreloaded: boolean }).unreloaded = true));
  s.upstream.configure({ tokenDelayMs: 20, completion: { mode: 'fixed', tokens: 60 } });
  const running = s.openai(KEYS.support).chat.completions.create(chat(30, { max_tokens: 200 }));
  const held = await waitFor(
    async () =>
      (await readBars(page)).find(
        (b) => b.tenant === 'support-bot' && b.budget === 'month-tokens' && b.held > 0,
      ),
    { what: 'the hold on the page' },
  );
  expect(held.heldPx).toBeGreaterThan(0);
  await running;
  const settled = await s.settled('support-bot');
  await waitFor(
    async () =>
      (await readBars(page)).find(
        (b) =>
          b.tenant === 'support-bot' &&
          b.budget === 'month-tokens' &&
          b.used === settled.windows[0]!.used &&
          b.held === 0,
      ),
    { what: 'the settled call on the page' },
  );
  expectBarsMatch(await readBars(page), await allUsage(s));
  expect(
    await page.evaluate(() => (window as unknown as { unreloaded?: boolean }).unreloaded),
  ).toBe(true);
  expect(await page.textContent('#live')).toContain('live');

  // Without JavaScript the server-rendered page shows the same bars.
  const noJs = await chromium.context.newPage();
  const cdp = await chromium.context.newCDPSession(noJs);
  await cdp.send('Emulation.setScriptExecutionDisabled', { value: true });
  await noJs.goto(`${s.edge.url}/budgets`);
  expectBarsMatch(await readBars(noJs), await allUsage(s));
  await noJs.close();

  // Sign out, then in with a virtual key: only that team.
  await Promise.all([page.waitForURL(`${s.edge.url}/budgets`), page.click('header button')]);
  expect(await page.locator('input[name=token]').count()).toBe(1);
  await page.fill('input[name=token]', KEYS.batch);
  await Promise.all([page.waitForURL(`${s.edge.url}/budgets`), page.click('button[type=submit]')]);
  const mine = await readBars(page);
  expect(mine.map((b) => b.tenant)).toEqual(['batch-summariser']);
  expect(await page.content()).not.toContain('support-bot');
});
