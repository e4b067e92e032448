import { closeSync, mkdirSync, openSync, statSync, utimesSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Ports handed out on this machine in the last CLAIM_MS, one file each. The kernel may give a
 * port that was probed and closed to the next caller at once, so without this two servers (of
 * one stack, one test, or two test workers) could be told the same port before either binds it.
 */
const CLAIMS_DIR = join(tmpdir(), 'holdfast-ports');
const CLAIM_MS = 15 * 60_000;

/** Claims a port for this process; false when another claim is younger than CLAIM_MS. */
function claim(port: number): boolean {
  const file = join(CLAIMS_DIR, String(port));
  try {
    closeSync(openSync(file, 'wx'));
    return true;
  } catch {
    try {
      if (Date.now() - statSync(file).mtimeMs < CLAIM_MS) return false;
      const now = new Date();
      utimesSync(file, now, now);
      return true;
    } catch {
      return false;
    }
  }
}

/** Never hand out these ports (ones this process was given for its own servers). */
export function reservePorts(ports: Iterable<number>): void {
  mkdirSync(CLAIMS_DIR, { recursive: true });
  for (const p of ports) {
    const file = join(CLAIMS_DIR, String(p));
    try {
      closeSync(openSync(file, 'a'));
      const now = new Date();
      utimesSync(file, now, now);
    } catch {
      // Only a safeguard: a port that cannot be marked is still checked by its server's bind.
    }
  }
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

/**
 * A TCP port that was free a moment ago on 127.0.0.1 and that nothing on this machine was
 * handed (by freePort or reservePorts) in the last 15 minutes.
 */
export async function freePort(): Promise<number> {
  mkdirSync(CLAIMS_DIR, { recursive: true });
  for (let tries = 0; ; tries++) {
    const port = await ephemeralPort();
    // After many tries the claims cover most of the range: take what the kernel gives.
    if (claim(port) || tries > 200) return port;
  }
}
