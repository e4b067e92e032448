import { EXIT, exitFor, type ExitCode } from './exit.js';
import { BaseError } from '@holdfast/events';

/** A failure the CLI reports on stderr and turns into an exit code. */
export class CliError extends BaseError<'cli_failed'> {
  constructor(
    message: string,
    readonly exit: ExitCode,
  ) {
    super({ code: 'cli_failed', message, context: { exit } });
  }
}

export interface Body {
  json?: unknown;
  /** A YAML (or JSON) document sent as text. */
  yaml?: string;
}

/**
 * The edge's admin API at `url`, with the admin token. Every answer that is not 2xx becomes a
 * CliError with the edge's error code and message; the token never appears in one.
 */
export class AdminClient {
  constructor(
    readonly url: string,
    readonly token: string,
    readonly fetchFn: typeof fetch = fetch,
  ) {}

  async request(method: string, path: string, body: Body = {}): Promise<unknown> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    let payload: string | undefined;
    if (body.yaml !== undefined) {
      headers['content-type'] = 'application/yaml';
      payload = body.yaml;
    } else if (body.json !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body.json);
    }
    let res: Response;
    try {
      res = await this.fetchFn(new URL(path, this.url), { method, headers, body: payload });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      throw new CliError(`cannot reach the edge at ${this.url} (${cause})`, EXIT.unavailable);
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      // Not JSON: reported below as an unexpected answer.
    }
    if (res.ok) return parsed;
    const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
    const what = error?.message ?? (text.slice(0, 200) || res.statusText);
    throw new CliError(
      `${res.status} ${error?.code ?? 'error'}: ${what}`,
      exitFor(res.status, error?.code),
    );
  }
}
