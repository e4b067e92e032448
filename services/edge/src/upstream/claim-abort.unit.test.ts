import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { compileConfig, HoldfastConfigSchema, type UpstreamConfig } from '@holdfast/config';
import { createLogger } from '@holdfast/runtime';
import { Registry } from 'prom-client';
import { afterEach, expect, test } from 'vitest';
import { DEFAULT_OPTIONS } from '../env.js';
import { EdgeMetrics } from '../metrics.js';
import { CallAborted, UpstreamClient, type OpenResult, type StreamFailure } from './client.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function serve(status: number, hits: { n: number }): Promise<string> {
  const server = createServer((req, res) => {
    hits.n++;
    req.resume();
    if (status !== 200) {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"down"}}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n');
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

/** Model `m` on upstream `p` (`retries` retries) with fallback `f` (none), and a client. */
function fallbackPair(primary: string, fallback: string, retries: number) {
  const config = compileConfig(
    HoldfastConfigSchema.parse({
      upstreams: [
        { id: 'p', baseUrl: primary, maxRetries: retries },
        { id: 'f', baseUrl: fallback, maxRetries: 0 },
      ],
      models: [
        {
          id: 'm',
          upstream: 'p',
          fallbackUpstreams: ['f'],
          tokenizer: 'o200k_base',
          price: { inputPerMTok: 1, outputPerMTok: 2 },
        },
      ],
      tenants: [{ id: 'team', useCases: [{ id: 'uc', maxTokens: 256, models: ['m'] }] }],
    }),
  );
  const options = DEFAULT_OPTIONS.upstream;
  const client = new UpstreamClient({
    logger: createLogger({ name: 'unit', level: 'silent' }),
    metrics: new EdgeMetrics(new Registry()),
    timeouts: options,
    retry: { ...options, retryBaseMs: 1, retryMaxMs: 2 },
    env: {},
    connections: options.connections,
    tenantShare: options.tenantShare,
  });
  return { config, client };
}

/** A streamed call of model `m` from `team` to `p`, then its fallback `f`. */
function openOn(
  { config, client }: ReturnType<typeof fallbackPair>,
  signal: AbortSignal,
  claim: (target: UpstreamConfig) => Promise<boolean>,
): Promise<OpenResult> {
  return client.open({
    tenant: 'team',
    path: '/chat/completions',
    body: { model: 'm', messages: [], stream: true },
    targets: [config.upstreams.get('p')!, config.upstreams.get('f')!],
    signal,
    stream: true,
    claim,
  });
}

/**
 * A client that leaves while the call's capacity is moved to a fallback (the claim's round
 * trip to the authority): the call is over, so the fallback is not sent it. Else the upstream
 * generates the whole reply (the provider bills it) and the edge, which drops every event of
 * an aborted call, bills none of its output.
 */
test('a call aborted while its fallback is claimed is not sent to the fallback', async () => {
  const primaryHits = { n: 0 };
  const fallbackHits = { n: 0 };
  const primary = await serve(503, primaryHits);
  const fallback = await serve(200, fallbackHits);
  const pair = fallbackPair(primary, fallback, 0);
  const { client } = pair;
  const live = new AbortController();
  try {
    const result = await openOn(pair, live.signal, async () => {
      // The client hangs up while capacity.move is on its way.
      live.abort(new CallAborted('client_disconnected'));
      await new Promise((r) => setTimeout(r, 5));
      return true;
    });
    expect(primaryHits.n).toBe(1);
    expect(fallbackHits.n).toBe(0);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.failure.kind).toBe('aborted');
    if (result.ok) result.value.opened.done();
  } finally {
    await client.close();
  }
});

const overloaded: StreamFailure = {
  kind: 'status',
  status: 529,
  message: 'overloaded_error',
  retryAfterMs: undefined,
};

/**
 * An error inside a 200 stream is one attempt of the call's budget: `again` goes on where the
 * loop was (the same upstream's retries, then its fallback), never with a fresh budget.
 */
test('errors inside opened streams share the attempts of the retry loop, then its fallback', async () => {
  const primaryHits = { n: 0 };
  const fallbackHits = { n: 0 };
  const pair = fallbackPair(await serve(200, primaryHits), await serve(200, fallbackHits), 1);
  const { client } = pair;
  const opened = async (p: Promise<OpenResult>) => {
    const r = await p;
    if (!r.ok) return r;
    r.value.opened.body.resume();
    r.value.opened.done();
    return r;
  };
  try {
    let r = await opened(openOn(pair, new AbortController().signal, () => Promise.resolve(true)));
    const upstreams: string[] = [];
    // Asked before each retry (the hold grows for it), not for the attempt given up on.
    let asked = 0;
    const beforeRetry = () => Promise.resolve(++asked > 0);
    while (r.ok) {
      upstreams.push(r.value.opened.upstream.id);
      r = await opened(r.value.again(overloaded, beforeRetry));
    }
    expect(upstreams).toEqual(['p', 'p', 'f']);
    expect(asked).toBe(2);
    expect([primaryHits.n, fallbackHits.n]).toEqual([2, 1]);
    expect(r.error).toMatchObject({
      attempts: 3,
      failure: {
        kind: 'status',
        status: 529,
        retries: { attempts: 3, upstreams: ['p', 'f'], stop: 'no_retries' },
      },
    });
  } finally {
    await client.close();
  }
});

/**
 * A client that leaves after an error inside the stream, before the retry (while the hold
 * grows): the call is over, so no fallback is claimed for it. Else capacity.move takes the
 * call's worst case of the fallback, which its close then settles there (counted `requested`,
 * all of it) for a call that never reached it.
 */
test('a call aborted before its in-stream retry claims no fallback', async () => {
  const fallbackHits = { n: 0 };
  const pair = fallbackPair(await serve(200, { n: 0 }), await serve(200, fallbackHits), 0);
  const { client } = pair;
  const live = new AbortController();
  const claimed: string[] = [];
  try {
    const first = await openOn(pair, live.signal, (t) => {
      claimed.push(t.id);
      return Promise.resolve(true);
    });
    if (!first.ok) throw new Error('the primary did not open');
    first.value.opened.body.resume();
    first.value.opened.done();
    live.abort(new CallAborted('client_disconnected'));
    const r = await first.value.again(overloaded);
    expect(claimed).toEqual([]);
    expect(fallbackHits.n).toBe(0);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.failure).toEqual({ kind: 'aborted', why: 'client_disconnected' });
  } finally {
    await client.close();
  }
});

/**
 * A retry whose hold cannot grow is not sent: the loop gives up where it would have retried,
 * before it claims the fallback, with the failure and the attempts told as when the retries
 * run out (the client's error says "after 2 attempts" on every surface).
 */
test('a retry refused before it goes claims no fallback and tells the attempts made', async () => {
  const fallbackHits = { n: 0 };
  const pair = fallbackPair(await serve(200, { n: 0 }), await serve(200, fallbackHits), 1);
  const { client } = pair;
  const claimed: string[] = [];
  try {
    let r = await openOn(pair, new AbortController().signal, (t) => {
      claimed.push(t.id);
      return Promise.resolve(true);
    });
    const grows = [true, false];
    while (r.ok) {
      r.value.opened.body.resume();
      r.value.opened.done();
      r = await r.value.again(overloaded, () => Promise.resolve(grows.shift()!));
    }
    expect(grows).toEqual([]);
    expect([claimed, fallbackHits.n]).toEqual([[], 0]);
    expect(r.error).toMatchObject({
      attempts: 2,
      failure: { kind: 'status', status: 529, retries: { attempts: 2, upstreams: ['p'] } },
    });
  } finally {
    await client.close();
  }
});
