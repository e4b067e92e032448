import { createServer, type Server } from 'node:http';
import { Webhook } from 'standardwebhooks';

export interface Received {
  id: string;
  timestamp: number;
  receivedAt: number;
  /** The verified payload: `{type, timestamp, data}`. */
  payload: { type: string; timestamp: string; data: Record<string, unknown> };
}

/**
 * A real webhook receiver on a port the kernel picks (listen on 0: a port picked free beforehand
 * can be taken by another test's connection before the receiver binds it). It verifies every request with the standardwebhooks
 * library (400 on a bad signature, like a careful receiver) and can go down and come back up
 * on the same port. Down, it keeps the port bound and resets every connection: a closed port
 * could be taken by another test's server meanwhile (seen once in CI, under load), and the
 * alerter would then get that server's HTTP answers instead of a network error.
 */
export class Receiver {
  readonly received: Received[] = [];
  readonly rejected: string[] = [];
  #server: Server | undefined;
  #down = false;
  #status = 204;
  #port = 0;

  private constructor(readonly secret: string) {}

  static async start(secret: string): Promise<Receiver> {
    const r = new Receiver(secret);
    await r.#listen();
    return r;
  }

  /** The bound port; it stays the same through `down()` and `up()`. */
  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** Distinct webhook-ids received (and verified). */
  ids(): Set<string> {
    return new Set(this.received.map((r) => r.id));
  }

  respondWith(status: number): void {
    this.#status = status;
  }

  /** Takes requests again (after `down()`). */
  up(): Promise<void> {
    this.#down = false;
    return Promise.resolve();
  }

  /** Resets every connection, open or new: the alerter's next attempt fails with a network error. */
  down(): Promise<void> {
    this.#down = true;
    this.#server?.closeAllConnections();
    return Promise.resolve();
  }

  async #listen(): Promise<void> {
    const verifier = new Webhook(this.secret);
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const headers = Object.fromEntries(
          Object.entries(req.headers).map(([k, v]) => [k, String(v)]),
        );
        try {
          const payload = verifier.verify(body, headers) as Received['payload'];
          if (this.#status < 300) {
            this.received.push({
              id: headers['webhook-id']!,
              timestamp: Number(headers['webhook-timestamp']),
              receivedAt: Date.now(),
              payload,
            });
          }
          res.writeHead(this.#status).end();
        } catch (err) {
          this.rejected.push((err as Error).message);
          res.writeHead(400).end();
        }
      });
    });
    server.on('connection', (socket) => {
      if (this.#down) socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (typeof address !== 'object' || !address) throw new Error('the receiver has no address');
    this.#port = address.port;
    this.#server = server;
  }

  /** Stops listening for good and drops open connections. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
