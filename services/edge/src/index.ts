export { buildEdge, edgeApp, type EdgeDeps } from './app.js';
export {
  DEFAULT_OPTIONS,
  EdgeEnv,
  loadConfig,
  type EdgeConfig,
  optionsFromEnv,
  type EdgeOptions,
  type UpstreamRetry,
  type UpstreamTimeouts,
} from './config.js';
export { EDGE_ERROR_CODES, httpError, type EdgeErrorCode } from './errors.js';
export { H as HOLDFAST_HEADERS } from './headers.js';
export { sha256Hex } from './auth.js';
export {
  start,
  startEdge,
  type EdgeServiceDeps,
  type RunningEdge,
  type StartedEdge,
  type StartEdgeOptions,
} from './service.js';
