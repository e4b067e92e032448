/**
 * The one error base of every package. Expected failures are values (`Result`); these errors
 * are for what a caller must handle by code. Every error has a stable `code`, whether a retry
 * can help, and context for the log.
 */
export class BaseError<Code extends string = string> extends Error {
  readonly code: Code;
  readonly retry: boolean;
  readonly context: Record<string, unknown>;

  constructor(opts: {
    code: Code;
    message: string;
    retry?: boolean;
    cause?: unknown;
    context?: Record<string, unknown>;
  }) {
    super(opts.message, { cause: opts.cause });
    this.name = new.target.name;
    this.code = opts.code;
    this.retry = opts.retry ?? false;
    this.context = opts.context ?? {};
  }
}

export type Result<T, E = BaseError> = { ok: true; value: T } | { ok: false; error: E };

export const Ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const Err = <E>(error: E): { ok: false; error: E } => ({ ok: false, error });

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
