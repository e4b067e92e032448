import { createServer } from 'node:net';

/**
 * Ports this process handed out or was told are taken. The kernel may give a closed port out
 * again at once, so without this two servers of one stack (or one test) could be told the same
 * port before either binds it.
 */
const handedOut = new Set<number>();

/** Never hand out these ports (ones this process was given for its own servers). */
export function reservePorts(ports: Iterable<number>): void {
  for (const p of ports) handedOut.add(p);
}

function ephemeralPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** A TCP port that was free a moment ago on 127.0.0.1, and not handed out before by this process. */
export async function freePort(): Promise<number> {
  // Tests run for a while: forget old ports long before the ephemeral range (~28k) runs out.
  if (handedOut.size > 10_000) handedOut.clear();
  for (;;) {
    const port = await ephemeralPort();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}
