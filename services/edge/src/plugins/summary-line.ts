import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Audit } from '../types.js';

/**
 * The fields of a request's summary line, and only these: ids, counts, the route and the
 * outcome. No header, body or config value has a field here, so no key can reach the line.
 */
export interface SummaryLine extends Audit {
  reqId: string;
  method: string;
  route: string;
  status: number;
  ms: number;
}

/** Every field of `Audit`, each named (undefined when unset): a new one must be copied here. */
type EveryAuditField = { [K in keyof Required<Audit>]: Audit[K] | undefined };

/**
 * A request's summary line, its fields copied one by one (a field set on `request.audit`
 * outside `Audit` is not written; one added to `Audit` fails to compile until it is copied).
 * Unset fields stay undefined, which pino leaves out.
 */
export function summaryLine(
  request: FastifyRequest,
  route: string,
  status: number,
  ms: number,
): SummaryLine {
  const a = request.audit;
  const audit: EveryAuditField = {
    tenant: a.tenant,
    keyId: a.keyId,
    endUser: a.endUser,
    useCase: a.useCase,
    model: a.model,
    reservationId: a.reservationId,
    promptTokens: a.promptTokens,
    maxTokens: a.maxTokens,
    completionTokens: a.completionTokens,
    outcome: a.outcome,
    code: a.code,
  };
  return {
    reqId: request.id,
    method: request.method,
    route,
    status,
    ms: Math.round(ms * 100) / 100,
    ...audit,
  };
}

const summaryLoggers = new WeakMap<FastifyBaseLogger, FastifyBaseLogger>();

/**
 * The logger of the summary lines: the server's, without redaction. The line's fields are
 * known (`summaryLine`), and the logger's wildcard paths (`*.apiKey`, ...) made pino run its
 * redaction on each of them: 2.9% of the edge's CPU under load (issue 14). Every other line
 * keeps the redaction. One child per server logger, made on first use.
 */
export function summaryLogger(server: FastifyBaseLogger): FastifyBaseLogger {
  let log = summaryLoggers.get(server);
  if (!log) summaryLoggers.set(server, (log = server.child({}, { redact: [] })));
  return log;
}
