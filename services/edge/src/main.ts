import { connectNats, createLogger, createRegistry, handleShutdown } from '@holdfast/runtime';
import { buildEdge } from './app.js';
import { loadConfig } from './config.js';

/** Composition root of the edge process: env → NATS → app → listen → one shutdown path. */
async function main(): Promise<void> {
  const { env, nats, options, logLevel } = loadConfig();
  const logger = createLogger({ name: 'edge', level: logLevel });
  const registry = createRegistry('edge');
  // One admit and one settle per call: skip the per-request stack capture of nats.js.
  const nc = await connectNats({
    servers: nats.servers,
    name: 'edge',
    logger,
    noAsyncTraces: true,
  });
  const app = await buildEdge({
    nc,
    names: nats.names,
    logger,
    registry,
    options,
    warmPool: ['o200k_base'],
  });
  await app.listen({ host: env.EDGE_HOST, port: env.EDGE_PORT });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : env.EDGE_PORT;
  // Stopped in reverse: the HTTP server (cutting open streams, settling them), then NATS.
  handleShutdown(logger, [
    { name: 'nats', stop: () => nc.drain() },
    { name: 'http', stop: () => app.close() },
  ]);
  logger.info({ port, configVersion: app.configSnapshot.version }, 'ready');
}

main().catch((err: unknown) => {
  // The logger may not exist yet: write one JSON line like pino would.
  process.stderr.write(
    `${JSON.stringify({ level: 60, msg: 'failed to start', err: String(err) })}\n`,
  );
  process.exit(1);
});
