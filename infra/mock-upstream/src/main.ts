import { createLogger, handleShutdown } from '@holdfast/runtime';
import { loadConfig } from './config.js';
import { startMockUpstream } from './server.js';

/** Process entry: the mock OpenAI-compatible upstream on MOCK_UPSTREAM_PORT (8089). */
const config = loadConfig();
const logger = createLogger({ name: 'mock-upstream', level: config.logLevel });
const upstream = await startMockUpstream({ ...config.options, logger });
handleShutdown(logger, [{ name: 'http', stop: () => upstream.stop() }]);
logger.info({ url: upstream.url, port: upstream.port }, 'ready');
