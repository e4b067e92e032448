import Fastify, { type FastifyInstance } from 'fastify';
import { Agent, request } from 'undici';

/** The edge's defaults (EDGE_BODY_LIMIT_BYTES, EDGE_REQUEST_TIMEOUT_MS). */
const BODY_LIMIT_BYTES = 10 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;

export interface BareProxy {
  app: FastifyInstance;
  /** Closes the server, then the pool to the upstream. */
  close(): Promise<void>;
}

/**
 * A fastify server with the edge's options (no logger, its body limit and timeout) and a
 * `/readyz`, and an undici agent as the edge's UpstreamClient's: one agent, its connections
 * kept alive between calls. The bare proxy's and the floor's edge's.
 */
export function edgeLikeServer(): { app: FastifyInstance; agent: Agent } {
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    forceCloseConnections: true,
    requestIdHeader: false,
    requestTimeout: REQUEST_TIMEOUT_MS,
  });
  app.get('/readyz', (_req, reply) => reply.send({ ok: true }));
  return { app, agent: new Agent({ keepAliveTimeout: 10_000, connections: 256 }) };
}

/**
 * The raw path the edge cannot avoid, and nothing else: a fastify server that forwards
 * POST /v1/chat/completions to `upstreamOrigin` over a keep-alive undici pool and pipes the
 * upstream's answer back (plain JSON or SSE alike). The same libraries and server options as
 * the edge (services/edge/src/app.ts, upstream/client.ts), without budgets, auth, counting,
 * NATS or logs, so that in `bench:stack` the edge's CPU per call minus this one's is what
 * Holdfast adds to a proxy hop in Node.
 */
export async function buildBareProxy(o: { upstreamOrigin: string }): Promise<BareProxy> {
  const { app, agent } = edgeLikeServer();
  const url = `${o.upstreamOrigin}/v1/chat/completions`;
  app.post('/v1/chat/completions', async (req, reply) => {
    // The edge parses the JSON body and sends its own serialisation: so does this.
    const body = req.body as { stream?: unknown };
    const res = await request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: body.stream === true ? 'text/event-stream' : 'application/json',
      },
      body: JSON.stringify(body),
      dispatcher: agent,
    });
    reply.code(res.statusCode);
    const type = res.headers['content-type'];
    if (typeof type === 'string') reply.header('content-type', type);
    return reply.send(res.body);
  });
  await app.ready();
  return {
    app,
    close: async () => {
      await app.close();
      await agent.close();
    },
  };
}
