import { createConnection, createServer, type Socket } from 'node:net';
import { freePort } from './ports.js';

export interface TcpProxyOptions {
  /**
   * Holds every chunk the server sends for this long (in order): each round trip of a client
   * behind the proxy takes at least that long, the way a far or loaded server looks. What the
   * client sends goes through at once. Default 0.
   */
  latencyMs?: number;
}

/** A TCP proxy in front of a real server whose server-to-client direction can be slowed or held. */
export interface TcpProxy {
  /** The target's URL with the proxy's host and port (`nats://127.0.0.1:P`, `redis://…`). */
  url: string;
  /**
   * Holds everything the server sends (heartbeats, replies) until `resume()`: a network that
   * stalls without closing, the way a paused server or a dropped route looks to a client. The
   * connection stays up; data is held, not dropped.
   */
  stall(): void;
  /** Delivers what was held, in order, and forwards again. */
  resume(): void;
  /** Drops every connection through the proxy and stops listening. */
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream: Socket;
  /** What arrived (and waited out the latency) while stalled. */
  held: Buffer[];
}

/** Starts a proxy on 127.0.0.1 in front of `target` (a URL with a host and a port). */
export async function tcpProxy(target: string, options: TcpProxyOptions = {}): Promise<TcpProxy> {
  const { protocol, hostname, port } = new URL(target);
  const latencyMs = options.latencyMs ?? 0;
  let stalled = false;
  const links = new Set<Link>();
  const deliver = (link: Link, chunk: Buffer) => {
    if (link.client.destroyed) return;
    if (stalled) link.held.push(chunk);
    else link.client.write(chunk);
  };
  const server = createServer((client) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    const link: Link = { client, upstream, held: [] };
    links.add(link);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      // Timers of one duration fire in the order they were set: the latency keeps the order.
      if (latencyMs > 0) setTimeout(() => deliver(link, chunk), latencyMs);
      else deliver(link, chunk);
    });
    const end = () => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  const listenPort = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, '127.0.0.1', resolve);
  });
  return {
    url: `${protocol}//127.0.0.1:${listenPort}`,
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
      for (const link of links) for (const chunk of link.held.splice(0)) deliver(link, chunk);
    },
    close: async () => {
      for (const link of links) {
        link.client.destroy();
        link.upstream.destroy();
      }
      await new Promise((r) => server.close(r));
    },
  };
}
