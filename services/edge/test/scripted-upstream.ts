import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the scripted upstream answers a model request with (the request's body parsed). */
type Script = (res: ServerResponse, body: Record<string, unknown>) => void;

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

export async function scriptedUpstream(): Promise<ScriptedUpstream> {
  let script: Script = (res) => res.end();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      script(res, JSON.parse(text || '{}') as Record<string, unknown>);
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

/** One typed SSE event, as the Responses API writes it. */
export function responsesEvent(type: string, data: object): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}
