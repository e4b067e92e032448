import { createLogger, createRegistry, handleShutdown, startOpsServer } from '@holdfast/runtime';
import { randomUUID } from 'node:crypto';
import { loadConfig } from './env.js';
import { start } from './service.js';

/** The process: config -> start -> ops server -> SIGHUP reload and one shutdown path -> ready. */
async function main(): Promise<void> {
  const config = loadConfig();
  const replicaId = randomUUID();
  const logger = createLogger({
    name: 'budget-authority',
    level: config.logLevel,
    base: { replica: replicaId.slice(0, 8) },
  });
  const registry = createRegistry('budget-authority');
  const service = await start(config, { logger, registry, replicaId });
  const ops = await startOpsServer({
    port: config.opsPort,
    logger,
    registry,
    checks: service.checks,
  });
  process.on('SIGHUP', () => void service.authority.reloadConfigFile());
  handleShutdown(
    logger,
    [
      { name: 'authority', stop: () => service.stop() },
      { name: 'ops-server', stop: () => ops.stop() },
    ],
    30_000,
  );
  logger.info(
    {
      opsPort: ops.port,
      configVersion: service.authority.ctx.config.version,
      redis: service.redis,
    },
    'ready',
  );
}

main().catch((err: unknown) => {
  // The logger may not exist yet: write one JSON line like pino would.
  process.stderr.write(
    `${JSON.stringify({ level: 60, msg: 'failed to start', err: String(err) })}\n`,
  );
  process.exit(1);
});
