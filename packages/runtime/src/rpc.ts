import {
  CALL_PATH_REPLIES,
  AUTHORITY_QUEUE,
  ERROR_HEADER,
  ERROR_MESSAGE_HEADER,
  type AuthorityErrorCode,
  BatchRequest,
  type AuthorityOperation,
  type BatchedOperation,
  type NatsNames,
} from '@holdfast/events';
import { headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { BaseError, Err, Ok, type Result } from './errors.js';

/** An error a handler returns on purpose; it travels to the caller in headers. */
export class RpcError extends BaseError<
  AuthorityErrorCode | 'timeout' | 'no_responders' | 'request_too_large'
> {}

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

/** The payload limit of the server this connection is on (NATS's default before it knows). */
function maxPayloadOf(nc: NatsConnection): number {
  return nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
}

/** Where a reply goes, for the log: the connection, its subject and logger. */
interface ReplyContext {
  nc: NatsConnection;
  subject: string;
  logger: Logger;
}

/**
 * A reply that NATS would refuse (over the server's max_payload): logged, and described for
 * the requester, who gets it as `reply_too_large` instead of hearing nothing until its timeout.
 * The request was handled; only its reply is lost.
 */
function tooLarge(ctx: ReplyContext, bytes: number, maxPayload: number): string {
  ctx.logger.error({ subject: ctx.subject, bytes, maxPayload }, 'reply too large');
  return `the reply to ${ctx.subject} is ${bytes} bytes, over the NATS max_payload of ${maxPayload} bytes: the request was handled but its reply cannot be sent; ask for less (one tenant) or raise max_payload`;
}

/**
 * Sends one reply, never throwing: a reply over the payload limit is answered
 * `reply_too_large` (see tooLarge); a connection that cannot send any more is logged.
 */
function respondSafely(msg: Msg, ctx: ReplyContext, send: () => void): void {
  try {
    send();
  } catch (err) {
    ctx.logger.error({ err, subject: ctx.subject }, 'reply not sent');
  }
}

export function authoritySubject(names: NatsNames, op: AuthorityOperation): string {
  return `${names.authorityPrefix}.${op}`;
}

/** What one request comes to: the handler's reply, or an error with its code. */
type Answer = { ok: true; value: unknown } | { ok: false; code: string; message: string };

/** One operation as the authority serves it: its request schema and its handler. */
export interface Route {
  schema: z.ZodType;
  handler: Handler<unknown, unknown>;
  /**
   * An exact fast verdict on a body (issue 14): true when the body, as it is after the check
   * (defaults filled), is what `schema` would output; otherwise `schema` decides.
   */
  check?: (body: unknown) => boolean;
}

/**
 * Answers one request body: parsed with its schema (a malformed one is `invalid_request`, never
 * a crash), then handled; a thrown bug becomes `internal`.
 */
async function answer(
  route: Route,
  body: unknown,
  msg: Msg,
  ctx: { logger: Logger; subject: string },
): Promise<Answer> {
  let request = body;
  if (!route.check?.(body)) {
    const parsed = route.schema.safeParse(body);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      const where = first?.path.length ? `${first.path.join('.')}: ` : '';
      return {
        ok: false,
        code: 'invalid_request',
        message: `${where}${first?.message ?? 'invalid request'}`,
      };
    }
    request = parsed.data;
  }
  try {
    const result = await route.handler(request, msg);
    if (!result.ok) return { ok: false, code: result.error.code, message: result.error.message };
    return { ok: true, value: result.value };
  } catch (err) {
    ctx.logger.error({ err, subject: ctx.subject }, 'handler failed');
    return { ok: false, code: 'internal', message: 'internal error' };
  }
}

function parseBody(msg: Msg): { ok: true; body: unknown } | { ok: false } {
  try {
    return { ok: true, body: msg.data.length === 0 ? {} : JSON.parse(decoder.decode(msg.data)) };
  } catch {
    return { ok: false };
  }
}

interface ServeOptions {
  logger: Logger;
  queue?: string;
}

function subscribe(
  nc: NatsConnection,
  subject: string,
  opts: ServeOptions,
  handle: (msg: Msg) => Promise<void>,
): Subscription {
  return nc.subscribe(subject, {
    queue: opts.queue ?? AUTHORITY_QUEUE,
    callback: (err, msg) => {
      if (err) {
        opts.logger.error({ err, subject }, 'subscription error');
        return;
      }
      // A handler's own failures are answered inside `handle`; this only catches a bug there,
      // which must not become an unhandled rejection (that would end the process).
      handle(msg).catch((err: unknown) =>
        opts.logger.error({ err, subject }, 'request not answered'),
      );
    },
  });
}

/**
 * Serves one operation in the authority's queue group: a coded error travels in headers, a
 * reply as the JSON body.
 */
export function serve<S extends z.ZodType, Rep>(
  nc: NatsConnection,
  subject: string,
  schema: S,
  handler: Handler<z.output<S>, Rep>,
  opts: ServeOptions & {
    onDone?: (outcome: string, ms: number) => void;
    /** The schema's exact fast verdict (Route.check). */
    check?: (body: unknown) => boolean;
  },
): Subscription {
  const route: Route = {
    schema,
    handler: handler as Handler<unknown, unknown>,
    ...(opts.check ? { check: opts.check } : {}),
  };
  return subscribe(nc, subject, opts, async (msg) => {
    const started = performance.now();
    const body = parseBody(msg);
    const a = body.ok
      ? await answer(route, body.body, msg, { logger: opts.logger, subject })
      : { ok: false as const, code: 'invalid_request', message: 'request body is not valid JSON' };
    const ctx = { nc, subject, logger: opts.logger };
    let outcome = a.ok ? 'ok' : a.code;
    respondSafely(msg, ctx, () => {
      if (!a.ok) return respondError(msg, a.code, a.message);
      const bytes = encoder.encode(JSON.stringify(a.value));
      const max = maxPayloadOf(nc);
      if (bytes.length <= max) return msg.respond(bytes);
      outcome = 'reply_too_large';
      respondError(msg, outcome, tooLarge(ctx, bytes.length, max));
    });
    opts.onDone?.(outcome, performance.now() - started);
  });
}

/**
 * Serves `batch`: several requests of the call path in one message, each answered by its
 * operation's route exactly as if it had come alone (all at once, like requests that arrive
 * together). Answers ready in the same turn of the event loop leave in one reply; one that
 * takes longer follows in another, so a slow item never holds up the rest. A batch that does
 * not parse is answered `invalid_request` in headers, like any request.
 */
export function serveBatch(
  nc: NatsConnection,
  subject: string,
  routes: Record<BatchedOperation, Route>,
  opts: ServeOptions & {
    onBatch?: (size: number) => void;
    onDone?: (op: BatchedOperation, outcome: string, ms: number) => void;
  },
): Subscription {
  return subscribe(nc, subject, opts, async (msg) => {
    const body = parseBody(msg);
    const batch = body.ok ? BatchRequest.safeParse(body.body) : undefined;
    if (!batch?.success) {
      const why = body.ok ? batch?.error.issues[0]?.message : 'request body is not valid JSON';
      respondError(msg, 'invalid_request', `batch: ${why ?? 'invalid request'}`);
      return;
    }
    opts.onBatch?.(batch.data.items.length);
    let ready: (Answer & { i: number })[] = [];
    const ctx = { nc, subject, logger: opts.logger };
    const send = () => {
      const parts = ready;
      ready = [];
      respondSafely(msg, ctx, () => respondInParts(msg, parts, maxPayloadOf(nc), ctx));
    };
    await Promise.all(
      batch.data.items.map(async ({ op, body: item }, i) => {
        const started = performance.now();
        const a = await answer(routes[op], item, msg, { logger: opts.logger, subject });
        opts.onDone?.(op, a.ok ? 'ok' : a.code, performance.now() - started);
        if (ready.length === 0) setImmediate(send);
        ready.push({ i, ...a });
      }),
    );
  });
}

/** NATS's default payload limit, for a connection that has not been told its server's yet. */
export const DEFAULT_MAX_PAYLOAD = 1_048_576;

/**
 * Answers in as many replies as NATS's payload limit needs (many windows make a big answer).
 * One item whose answer alone is over the limit is answered `reply_too_large` in its place.
 */
function respondInParts(
  msg: Msg,
  items: (Answer & { i: number })[],
  maxPayload: number,
  ctx: ReplyContext,
): void {
  const bytes = encoder.encode(JSON.stringify({ items }));
  if (bytes.length <= maxPayload) {
    msg.respond(bytes);
    return;
  }
  const [only] = items;
  if (items.length === 1 && only !== undefined) {
    const message = tooLarge(ctx, bytes.length, maxPayload);
    msg.respond(
      encoder.encode(
        JSON.stringify({ items: [{ i: only.i, ok: false, code: 'reply_too_large', message }] }),
      ),
    );
    return;
  }
  const half = Math.ceil(items.length / 2);
  respondInParts(msg, items.slice(0, half), maxPayload, ctx);
  respondInParts(msg, items.slice(half), maxPayload, ctx);
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
  const payload = encoder.encode(JSON.stringify(body));
  const max = maxPayloadOf(nc);
  if (payload.length > max) {
    return Err(
      new RpcError({
        code: 'request_too_large',
        message: `the request to ${subject} is ${payload.length} bytes, over the NATS max_payload of ${max} bytes: nothing was sent`,
        context: { subject, bytes: payload.length, maxPayload: max },
      }),
    );
  }
  try {
    msg = await nc.request(subject, payload, { timeout: timeoutMs });
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
  if (code) return Err(codedError(code, msg.headers?.get(ERROR_MESSAGE_HEADER) ?? code));
  let reply: unknown;
  try {
    reply = JSON.parse(decoder.decode(msg.data));
  } catch {
    reply = undefined;
  }
  return parseReply(replySchema, reply, subject);
}

/** A coded error a handler returned, as the caller gets it. */
export function codedError(code: string, message: string): RpcError {
  return new RpcError({
    code: code as AuthorityErrorCode,
    message,
    retry: code === 'budget_store_unavailable',
  });
}

/**
 * Checks a reply against its schema: a reply that does not match is `internal`. The call
 * path's replies are parsed fast first (`CALL_PATH_REPLIES`, zod's output to the byte), zod
 * deciding only what that does not pass.
 */
export function parseReply<S extends z.ZodType>(
  schema: S,
  reply: unknown,
  subject: string,
): Result<z.output<S>, RpcError> {
  const fast = CALL_PATH_REPLIES.get(schema)?.(reply);
  if (fast !== undefined) return Ok(fast as z.output<S>);
  const parsed = schema.safeParse(reply);
  if (!parsed.success) {
    return Err(new RpcError({ code: 'internal', message: `malformed reply on ${subject}` }));
  }
  return Ok(parsed.data);
}
