import { createConnection, createServer, type Socket } from 'node:net';

/** A TCP proxy in front of a real server whose server-to-client direction can be held. */
export interface StallProxy {
  url: string;
  /** Holds everything the server sends (heartbeats, replies) until `resume()`. */
  stall(): void;
  /** Delivers what was held and forwards again. */
  resume(): void;
  close(): Promise<void>;
}

/**
 * A network that stalls without closing, the way a paused server or a dropped route looks to
 * a client: the connection stays up, nothing arrives. Data is held, not dropped.
 */
export async function stallProxy(target: string): Promise<StallProxy> {
  const { hostname, port } = new URL(target);
  let stalled = false;
  const links = new Set<{ client: Socket; held: Buffer[] }>();
  const server = createServer((client) => {
    const link = { client, held: [] as Buffer[] };
    links.add(link);
    const upstream = createConnection({ host: hostname, port: Number(port) });
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => (stalled ? link.held.push(chunk) : client.write(chunk)));
    const end = () => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  return {
    url: `nats://127.0.0.1:${address.port}`,
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
      for (const link of links) for (const chunk of link.held.splice(0)) link.client.write(chunk);
    },
    close: async () => {
      for (const link of links) link.client.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
