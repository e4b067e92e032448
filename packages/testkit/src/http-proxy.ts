import { createServer, request, type IncomingMessage } from 'node:http';
import { freePort } from './ports.js';

/** Where one request goes, and how long it waits first (a slow server). */
export interface HttpRoute {
  /** The base URL to send it to (host and port; the request keeps its own path). */
  target: string;
  delayMs?: number;
}

/** An HTTP proxy on 127.0.0.1 whose route per request the test decides. */
export interface HttpProxy {
  url: string;
  /** Ends every connection, idle or not, and stops listening. */
  close(): Promise<void>;
}

/**
 * Forwards each request (method, path, headers, body) to the target `route` picks from it and
 * its body, read whole first, and streams the answer back as it comes. A target that fails
 * drops the client's connection.
 */
export async function httpProxy(
  route: (req: IncomingMessage, body: Buffer) => HttpRoute,
): Promise<HttpProxy> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const { target, delayMs = 0 } = route(req, body);
      const to = new URL(target);
      setTimeout(() => {
        const up = request(
          {
            host: to.hostname,
            port: to.port,
            path: req.url,
            method: req.method,
            headers: req.headers,
          },
          (r) => {
            res.writeHead(r.statusCode ?? 502, r.headers);
            r.pipe(res);
          },
        );
        up.on('error', () => res.destroy());
        up.end(body);
      }, delayMs);
    });
  });
  // A port the testkit hands out (freePort), as tcpProxy does: never one claimed by another.
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
