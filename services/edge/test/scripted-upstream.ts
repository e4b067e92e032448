import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { entry, type Stack, type TestConfig } from './harness.js';

/** What the scripted upstream answers a model request with (the request's body parsed, its path). */
type Script = (res: ServerResponse, body: Record<string, unknown>, path: string) => void;

/**
 * An upstream that answers each model request with the script set last: for streams no
 * provider writes on purpose (a reset after the terminal event, odd usage), which the mock
 * upstream does not model.
 */
export interface ScriptedUpstream {
  /** Its base URL (`/v1`), for an upstream's `baseUrl`. */
  url: string;
  next(script: Script): void;
  stop(): Promise<void>;
}

async function scriptedUpstream(): Promise<ScriptedUpstream> {
  let script: Script = (res) => res.end();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      script(res, JSON.parse(text || '{}') as Record<string, unknown>, req.url ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    next: (s) => (script = s),
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One typed SSE event, as the Responses API (and the Messages API) writes it. */
export function responsesEvent(type: string, data: object): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/**
 * A stack whose upstream `upstreamId` (after `patch`) is a scripted one, that tries each call
 * once.
 */
export async function scriptedStack(
  stack: (o: object) => Promise<Stack>,
  upstreamId = 'default',
  patch: (c: TestConfig) => void = () => undefined,
  /** More of the stack's options (its Redis, ...). */
  more: object = {},
): Promise<{ s: Stack; up: ScriptedUpstream }> {
  const up = await scriptedUpstream();
  const s = await stack({
    ...more,
    patch: (c: TestConfig) => {
      patch(c);
      const upstream = entry(c.upstreams, upstreamId);
      upstream.baseUrl = up.url;
      upstream.maxRetries = 0;
    },
  });
  return { s, up };
}
