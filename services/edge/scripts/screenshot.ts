/**
 * pnpm --filter @holdfast/edge screenshot: docs/screenshots/budgets.png, the status page in a
 * realistic state. The seed's three teams under one org run their workloads through a real
 * edge and authority (mock upstream): batch-summariser pulls 60 digests with 16 workers in
 * reserve mode and ends near its 40,000 tokens; support-bot has triage calls in flight (held);
 * finance-ops runs in post mode and overshoots, as check-then-bill does. Then headless
 * Chromium signs in with the admin token and takes the picture.
 *
 * Uses NATS_URL / REDIS_URL when set, else starts nats-server and redis-server from PATH.
 * SCREENSHOT_OUT overrides the output path.
 */
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRedis } from '@holdfast/budget-authority';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import { namesWithPrefix } from '@holdfast/events';
import { startMockUpstream } from '@holdfast/mock-upstream';
import { requireUrl, resolveInfra, waitFor } from '@holdfast/testkit/infra';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import OpenAI from 'openai';
import { sha256Hex, startEdge } from '../src/index.js';
import { launchChromium } from '../test/browser.js';

const OUT =
  process.env.SCREENSHOT_OUT ??
  fileURLToPath(new URL('../../../docs/screenshots/budgets.png', import.meta.url));
const ADMIN_TOKEN = randomBytes(24).toString('base64url');
const KEYS = {
  batch: 'sk-hf-shot-batch',
  support: 'sk-hf-shot-support',
  finance: 'sk-hf-shot-finance',
};

function config(upstreamUrl: string) {
  const key = (id: string, secret: string) => [{ id, sha256: sha256Hex(secret) }];
  return {
    upstreams: [{ id: 'default', baseUrl: upstreamUrl }],
    models: [
      {
        id: 'gpt-4o',
        upstream: 'default',
        tokenizer: 'o200k_base',
        price: { inputPerMTok: 2.5, outputPerMTok: 10, cachedInputPerMTok: 1.25 },
      },
    ],
    tenants: [
      { id: 'acme', budgets: [{ window: 'month', limit: 1.5, unit: 'usd' }] },
      {
        id: 'batch-summariser',
        parent: 'acme',
        mode: 'reserve',
        maxInFlight: 32,
        budgets: [{ window: 'month', limit: 40_000, unit: 'tokens' }],
        useCases: [{ id: 'UC-112', maxTokens: 1_024, models: ['gpt-4o'] }],
        keys: key('batch-1', KEYS.batch),
      },
      {
        id: 'support-bot',
        parent: 'acme',
        mode: 'reserve',
        budgets: [
          { window: 'month', limit: 60_000, unit: 'tokens' },
          { window: 'day', limit: 0.2, unit: 'usd' },
        ],
        useCases: [{ id: 'UC-101', maxTokens: 512, models: ['gpt-4o'] }],
        keys: key('support-1', KEYS.support),
      },
      {
        id: 'finance-ops',
        parent: 'acme',
        mode: 'post',
        budgets: [{ window: 'month', limit: 20_000, unit: 'tokens' }],
        useCases: [{ id: 'UC-087', maxTokens: 512, models: ['gpt-4o'] }],
        keys: key('finance-1', KEYS.finance),
      },
    ],
  };
}

/** A prompt of about `words` o200k tokens. */
const prompt = (words: number) =>
  Array.from({ length: words }, (_, i) => (i % 2 ? 'account' : 'digest')).join(' ');

/** `items` calls pulled by `workers`; a refusal drops the item, as in the seed's experiment. */
async function pull(workers: number, items: number, call: () => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next++ < items) await call().catch(() => undefined);
    }),
  );
}

async function main(): Promise<void> {
  const infra = await resolveInfra(['nats', 'redis']);
  const nc = await connect({ servers: requireUrl(infra.urls, 'nats') });
  const names = namesWithPrefix(`shot${randomBytes(3).toString('hex')}`);
  const redis = createRedis(requireUrl(infra.urls, 'redis'));
  await redis.connect();
  const keyPrefix = `hf-shot-${randomBytes(3).toString('hex')}`;
  const upstream = await startMockUpstream({ port: 0 });
  const stops: Array<() => Promise<unknown>> = [() => upstream.stop()];
  try {
    // The authority as every test starts it (its own start(config, deps)), on the real clock.
    const authority = await startTestAuthority({
      natsUrl: requireUrl(infra.urls, 'nats'),
      nc,
      redisUrl: requireUrl(infra.urls, 'redis'),
      names,
      keyPrefix,
      config: config(upstream.url),
      clock: false,
    });
    stops.push(() => authority.stop());
    const edge = await startEdge({ nc, names, options: { adminToken: ADMIN_TOKEN } });
    stops.push(() => edge.stop());
    const client = (key: string) =>
      new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: key, maxRetries: 0 });

    // 60 weekly digests (~370 prompt tokens, up to 1,024 out, nearly always all of it).
    upstream.configure({ completion: { mode: 'uniform', min: 940, max: 1_024 } });
    const digest = {
      model: 'gpt-4o',
      messages: [{ role: 'user' as const, content: prompt(366) }],
    };
    await pull(16, 60, () =>
      client(KEYS.batch).chat.completions.create({ ...digest, max_tokens: 1_024 }),
    );
    // Invoice coding in post mode: 16 at once all pass the check, and all are billed.
    upstream.configure({ completion: { mode: 'uniform', min: 300, max: 512 } });
    const invoice = {
      model: 'gpt-4o',
      messages: [{ role: 'user' as const, content: prompt(320) }],
    };
    await pull(16, 40, () => client(KEYS.finance).chat.completions.create(invoice));
    // Ticket triage: short replies (clamped from 4,096 to 512), a few still running.
    upstream.configure({ completion: { mode: 'uniform', min: 20, max: 120 } });
    const triage = {
      model: 'gpt-4o',
      messages: [{ role: 'user' as const, content: prompt(180) }],
    };
    await pull(4, 24, () =>
      client(KEYS.support).chat.completions.create({ ...triage, max_tokens: 4_096 }),
    );
    upstream.configure({ tokenDelayMs: 1_000, completion: { mode: 'fixed', tokens: 400 } });
    const running = Array.from({ length: 3 }, () =>
      client(KEYS.support)
        .chat.completions.create({ ...triage, max_tokens: 4_096 })
        .catch(() => undefined),
    );
    await waitFor(() => upstream.stats().inFlight === 3, { what: 'triage calls in flight' });

    const chromium = await launchChromium({ width: 1240, height: 720 }, 1);
    stops.push(() => chromium.close());
    const page = await chromium.context.newPage();
    await page.goto(`${edge.url}/budgets`);
    await page.fill('input[name=token]', ADMIN_TOKEN);
    await Promise.all([page.waitForURL(`${edge.url}/budgets`), page.click('button[type=submit]')]);
    await page.waitForSelector('#live.on');
    await mkdir(dirname(OUT), { recursive: true });
    await page.screenshot({ path: OUT, fullPage: true });
    process.stdout.write(`wrote ${OUT}\n`);
    await edge.stop();
    await Promise.all(running);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    // Only what this run wrote: the Redis keys under its prefix, its event streams.
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1_000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
    redis.disconnect();
    const jsm = await jetstreamManager(nc);
    for (const stream of [names.eventsStream, `${names.eventsStream}_DEADLETTER`]) {
      await jsm.streams.delete(stream).catch(() => undefined);
    }
    await nc.drain();
    await infra.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
