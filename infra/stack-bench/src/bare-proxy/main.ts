import { z } from 'zod';
import { buildBareProxy } from './app.js';

/**
 * Process entry of the bench's bare proxy (app.ts), started by stack.ts beside the stack so
 * that its CPU is read from /proc like every other process's. Stops on SIGTERM or SIGINT.
 */
const Env = z.object({
  /** Where it listens. */
  BARE_PROXY_HOST: z.string().default('127.0.0.1'),
  BARE_PROXY_PORT: z.coerce.number().int().min(1).max(65_535),
  /** The mock upstream's origin (`http://127.0.0.1:<port>`). */
  BARE_PROXY_UPSTREAM: z.url(),
});
const env = Env.parse(process.env);
const proxy = await buildBareProxy({ upstreamOrigin: env.BARE_PROXY_UPSTREAM });
await proxy.app.listen({ host: env.BARE_PROXY_HOST, port: env.BARE_PROXY_PORT });
let stopping = false;
const stop = () => {
  if (stopping) process.exit(1);
  stopping = true;
  proxy.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
