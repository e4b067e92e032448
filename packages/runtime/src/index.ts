export * from './logger.js';
export * from './errors.js';
export * from './shutdown.js';
export * from './nats.js';
export * from './rpc.js';
export * from './authority-client.js';
export * from './metrics.js';
export * from './ops-server.js';
