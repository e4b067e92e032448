import {
  AUTHORITY_QUEUE,
  ERROR_HEADER,
  ERROR_MESSAGE_HEADER,
  type AuthorityErrorCode,
  type AuthorityOperation,
  type NatsNames,
} from '@holdfast/events';
import { headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { BaseError, Err, Ok, type Result } from './errors.js';

/** An error a handler returns on purpose; it travels to the caller in headers. */
export class RpcError extends BaseError<AuthorityErrorCode | 'timeout' | 'no_responders'> {}

export type Handler<Req, Rep> = (request: Req, msg: Msg) => Promise<Result<Rep, RpcError>>;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function respondError(msg: Msg, code: string, message: string): void {
  const h = headers();
  h.set(ERROR_HEADER, code);
  // Header values are single-line; keep them short and printable.
  h.set(ERROR_MESSAGE_HEADER, message.replace(/[\r\n]+/g, ' ').slice(0, 1_000));
  msg.respond(undefined, { headers: h });
}

export function authoritySubject(names: NatsNames, op: AuthorityOperation): string {
  return `${names.authorityPrefix}.${op}`;
}

/**
 * Serves one operation in the authority's queue group. The request is parsed with its schema
 * (a malformed one gets `invalid_request`, never a crash); a thrown bug becomes `internal`.
 */
export function serve<S extends z.ZodType, Rep>(
  nc: NatsConnection,
  subject: string,
  schema: S,
  handler: Handler<z.output<S>, Rep>,
  opts: { logger: Logger; queue?: string; onDone?: (outcome: string, ms: number) => void },
): Subscription {
  return nc.subscribe(subject, {
    queue: opts.queue ?? AUTHORITY_QUEUE,
    callback: (err, msg) => {
      if (err) {
        opts.logger.error({ err, subject }, 'subscription error');
        return;
      }
      const started = performance.now();
      void handle(msg).then((outcome) => opts.onDone?.(outcome, performance.now() - started));
    },
  });

  async function handle(msg: Msg): Promise<string> {
    let body: unknown;
    try {
      body = msg.data.length === 0 ? {} : JSON.parse(decoder.decode(msg.data));
    } catch {
      respondError(msg, 'invalid_request', 'request body is not valid JSON');
      return 'invalid_request';
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      const where = first?.path.length ? `${first.path.join('.')}: ` : '';
      respondError(msg, 'invalid_request', `${where}${first?.message ?? 'invalid request'}`);
      return 'invalid_request';
    }
    try {
      const result = await handler(parsed.data, msg);
      if (!result.ok) {
        respondError(msg, result.error.code, result.error.message);
        return result.error.code;
      }
      msg.respond(encoder.encode(JSON.stringify(result.value)));
      return 'ok';
    } catch (err) {
      opts.logger.error({ err, subject }, 'handler failed');
      respondError(msg, 'internal', 'internal error');
      return 'internal';
    }
  }
}

/**
 * Sends one request and validates the reply. Transport failures (timeout, nobody listening)
 * and coded errors from the handler come back as values.
 */
export async function request<S extends z.ZodType>(
  nc: NatsConnection,
  subject: string,
  body: unknown,
  replySchema: S,
  timeoutMs: number,
): Promise<Result<z.output<S>, RpcError>> {
  let msg: Msg;
  try {
    msg = await nc.request(subject, encoder.encode(JSON.stringify(body)), { timeout: timeoutMs });
  } catch (err) {
    const name = (err as Error).name;
    const noResponders =
      name === 'NoRespondersError' || /no responders/i.test((err as Error).message);
    return Err(
      new RpcError({
        code: noResponders ? 'no_responders' : 'timeout',
        message: noResponders
          ? `no responder on ${subject}`
          : `no reply on ${subject} within ${timeoutMs} ms`,
        retry: true,
        cause: err,
      }),
    );
  }
  const code = msg.headers?.get(ERROR_HEADER);
  if (code) {
    return Err(
      new RpcError({
        code: code as AuthorityErrorCode,
        message: msg.headers?.get(ERROR_MESSAGE_HEADER) ?? code,
        retry: code === 'budget_store_unavailable',
      }),
    );
  }
  const parsed = replySchema.safeParse(JSON.parse(decoder.decode(msg.data)));
  if (!parsed.success) {
    return Err(new RpcError({ code: 'internal', message: `malformed reply on ${subject}` }));
  }
  return Ok(parsed.data);
}
