// The fastify decorations (request.caller, app.counter, ...) for code that imports the edge.
import './types.js';

export { sha256Hex } from './request/auth.js';
export { startEdge, type RunningEdge, type StartEdgeOptions } from './service.js';
