import type { FastifyBaseLogger } from 'fastify';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** A parent that can say whether a level is written (pino's loggers can). */
type Parent = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/**
 * A request's logger (fastify's `request.log`, `reply.log`), its child of the server's logger
 * made on the first line written through it, not with every request. fastify makes one child
 * per request (`{ reqId }`), and a child of the services' logger serializes its bindings through
 * the redaction (2.3-3.0 µs a request; issue 14, docs/benchmarks.md), while a call that goes well
 * writes no line through it (its summary line goes through the server's logger). A line below
 * the parent's level makes no child either. Once made, every line is the child's, to the byte:
 * the same bindings, options and redaction as fastify's own factory would have given it.
 */
export class RequestLog implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Parent,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  /** The child, made now if it was not yet. */
  get made(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.#child ? this.#child.level : this.parent.level;
  }

  set level(level: string) {
    this.made.level = level;
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }

  error(...args: unknown[]): void {
    this.#write('error', args);
  }

  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }

  info(...args: unknown[]): void {
    this.#write('info', args);
  }

  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }

  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }

  silent(..._args: unknown[]): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.made.child(bindings, options);
  }

  #write(level: Level, args: unknown[]): void {
    // The child is made only for a line its level lets through (it has the parent's level).
    if (!this.#child && this.parent.isLevelEnabled?.(level) === false) return;
    const log = this.made;
    Reflect.apply(log[level], log, args);
  }
}

/**
 * fastify's `childLoggerFactory` for the edge: a RequestLog, or the child at once when the
 * route sets a level or serializers of its own (no edge route does).
 */
export function requestLogFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  if (options.level !== undefined || options.serializers !== undefined) {
    return logger.child(bindings, options);
  }
  return new RequestLog(logger, bindings, options);
}
