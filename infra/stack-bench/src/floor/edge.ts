import { hash } from 'node:crypto';
import { createInbox, type NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import { edgeLikeServer } from '../bare-proxy/app.js';
import { Batcher } from './batcher.js';
import { subject, type Caller, type Op, type Reply, type Request } from './protocol.js';

const AUTHORITY_TIMEOUT_MS = 5_000;

/** `x-floor-requests: single`: this call's admit and settle go alone, not in a batch. */
export const SINGLE_HEADER = 'x-floor-requests';

export interface FloorEdge {
  app: FastifyInstance;
  /** Settles the authority did not confirm (a bug or a timeout). */
  settleFailures(): number;
  close(): Promise<void>;
}

/** The usage an OpenAI-style reply reports; undefined when it reports none. */
export function usageOf(text: string): { prompt: number; completion: number } | undefined {
  try {
    const u = (
      JSON.parse(text) as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } }
    ).usage;
    if (typeof u?.prompt_tokens === 'number' && typeof u.completion_tokens === 'number') {
      return { prompt: u.prompt_tokens, completion: u.completion_tokens };
    }
  } catch {
    // Not JSON: billed as the hold below.
  }
  return undefined;
}

const error = (code: string, message: string) => ({
  error: { message, type: 'invalid_request_error', code, param: null },
});

/**
 * The floor's edge: the bare proxy (bare-proxy/app.ts) plus what SPEC §1 puts on the call
 * path and nothing else. Per call: the key looked up by its sha256; max_tokens clamped; an
 * `admit` request to the authority; the upstream called (plain JSON, keep-alive undici pool);
 * its usage read from the reply (JSON.parse, no counting); the reply sent on, and a `settle`
 * request sent without waiting for it, as the real edge does. The prompt is held at a bound
 * from the body's size (3 bytes a token), where the real edge counts it.
 */
export async function buildFloorEdge(o: {
  nc: NatsConnection;
  upstreamOrigin: string;
  keys: ReadonlyMap<string, Caller>;
  maxTokens: number;
}): Promise<FloorEdge> {
  const { app, agent } = edgeLikeServer();
  const url = `${o.upstreamOrigin}/v1/chat/completions`;
  const inbox = createInbox();
  const batcher = new Batcher({
    publish: (s, data, reply) => o.nc.publish(s, data, { reply }),
    inbox,
    timeoutMs: AUTHORITY_TIMEOUT_MS,
  });
  o.nc.subscribe(`${inbox}.*`, {
    callback: (err, m) => (err ? undefined : batcher.reply(m.subject, m.string())),
  });
  const single = async <O extends Op>(op: O, body: Request<O>): Promise<Reply<O>> => {
    const m = await o.nc.request(subject(op), JSON.stringify(body), {
      timeout: AUTHORITY_TIMEOUT_MS,
    });
    return JSON.parse(m.string()) as Reply<O>;
  };
  const batched = <O extends Op>(op: O, body: Request<O>) => batcher.request(op, body);
  let settleFailures = 0;

  app.post('/v1/chat/completions', async (req, reply) => {
    const auth = req.headers.authorization;
    const caller = auth?.startsWith('Bearer ')
      ? o.keys.get(hash('sha256', auth.slice(7)))
      : undefined;
    if (!caller) return reply.code(401).send(error('invalid_api_key', 'unknown key'));
    const ask = req.headers[SINGLE_HEADER] === 'single' ? single : batched;
    const body = req.body as { model?: unknown; max_tokens?: unknown };
    const maxTokens =
      typeof body.max_tokens === 'number' ? Math.min(body.max_tokens, o.maxTokens) : o.maxTokens;
    body.max_tokens = maxTokens;
    const model = String(body.model);
    const prompt = Math.ceil(Number(req.headers['content-length'] ?? 0) / 3);
    const admitted = await ask('admit', { ...caller, model, prompt, maxTokens });
    if (!admitted.ok) return reply.code(429).send(error(admitted.code, 'refused'));
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      dispatcher: agent,
    });
    const text = await res.body.text();
    // No usage reported: the hold is billed.
    const usage = usageOf(text) ?? { prompt, completion: maxTokens };
    const { reservationId } = admitted;
    ask('settle', { ...caller, model, reservationId, ...usage }).then(
      (r) => void (r.ok || settleFailures++),
      () => void settleFailures++,
    );
    reply.code(res.statusCode);
    const type = res.headers['content-type'];
    if (typeof type === 'string') reply.header('content-type', type);
    return reply.send(text);
  });
  await app.ready();
  return {
    app,
    settleFailures: () => settleFailures,
    close: async () => {
      await app.close();
      await agent.close();
    },
  };
}
