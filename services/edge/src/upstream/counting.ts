import type { UpstreamConfig } from '@holdfast/config';
import { Err, Ok, type Logger, type Result } from '@holdfast/runtime';
import { request, type Dispatcher } from 'undici';
import { baseUrl, rootUrl, upstreamHeaders } from './endpoint.js';

/**
 * Why an upstream's counting endpoint gave no count. `status` is the upstream's HTTP status
 * when it answered one (`count_refused`: a 4xx about the request itself means the call would
 * fail the same way); null when it could not be reached or answered nonsense. A plain object:
 * the caller falls back to its own count, so nothing needs a stack.
 */
export interface CountError {
  code: 'count_refused' | 'count_unreachable' | 'count_bad_reply' | 'no_upstream';
  status: number | null;
  message: string;
}

/** What an upstream's counting endpoint said: a count, or why not. */
export type CountReply = Result<number, CountError>;

export interface UpstreamCounterOptions {
  agent: Dispatcher;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  timeoutMs?: number;
}

/**
 * The counting endpoints of upstreams, for `tokenizer: upstream` and for state the edge
 * cannot see: llama-server's `/apply-template` + `/tokenize`, Anthropic's
 * `/v1/messages/count_tokens`, OpenAI's `/v1/responses/input_tokens`.
 */
export class UpstreamCounter {
  readonly #o: UpstreamCounterOptions;
  /** count_tokens of a '.' reply, by upstream and model (see replyText). */
  readonly #replyBase = new Map<string, number>();

  constructor(opts: UpstreamCounterOptions) {
    this.#o = opts;
  }

  /**
   * A chat prompt the way a llama-server upstream counts it: its chat template rendered by
   * `POST /apply-template` over the request body (messages, and the tools and response format
   * the template renders too), then `POST /tokenize`d (both at the server root). undefined when
   * the upstream cannot say (the caller then counts with the proven upper bound).
   */
  async chatPrompt(
    target: UpstreamConfig,
    body: Record<string, unknown>,
  ): Promise<number | undefined> {
    const { stream: _s, stream_options: _o, ...rendered } = body;
    const root = rootUrl(target, this.#o.env);
    const prompt = await this.#post(target, `${root}/apply-template`, rendered);
    const text = prompt.ok ? (prompt.value as { prompt?: unknown }).prompt : undefined;
    return typeof text === 'string' ? this.tokenize(target, text) : undefined;
  }

  /** A text by llama-server's own tokenizer (`POST /tokenize`); undefined when it cannot say. */
  async tokenize(target: UpstreamConfig, text: string): Promise<number | undefined> {
    const root = rootUrl(target, this.#o.env);
    const reply = await this.#post(target, `${root}/tokenize`, {
      content: text,
      add_special: false,
    });
    const tokens = reply.ok ? (reply.value as { tokens?: unknown }).tokens : undefined;
    return Array.isArray(tokens) ? tokens.length : undefined;
  }

  /** Anthropic's `POST /v1/messages/count_tokens` (`anthropic-version`/`-beta` forwarded). */
  messages(
    target: UpstreamConfig,
    body: Record<string, unknown>,
    forwarded: Readonly<Record<string, string>>,
  ): Promise<CountReply> {
    const url = `${rootUrl(target, this.#o.env)}/v1/messages/count_tokens`;
    return this.#count(target, url, body, forwarded);
  }

  /**
   * A text's tokens by Anthropic's own tokenizer, for output the edge counts itself (a stream
   * cut or abandoned before its usage): count_tokens of the text as the reply after a one-
   * character turn, less the same with a reply of '.', plus the 1 token '.' is. The framing
   * cancels out, so the count is the text's (Anthropic refuses a reply ending in whitespace:
   * trimmed, and counted as a token). The baseline is asked once per upstream and model.
   */
  async replyText(
    target: UpstreamConfig,
    model: string,
    text: string,
    forwarded: Readonly<Record<string, string>>,
  ): Promise<number | undefined> {
    const trimmed = text.trimEnd();
    if (trimmed === '') return text === '' ? 0 : 1;
    const count = async (reply: string) => {
      const messages = [
        { role: 'user', content: '.' },
        { role: 'assistant', content: reply },
      ];
      const r = await this.messages(target, { model, messages }, forwarded);
      return r.ok ? r.value : undefined;
    };
    const key = `${target.id}\u0000${model}`;
    let base = this.#replyBase.get(key);
    if (base === undefined) {
      base = await count('.');
      if (base === undefined) return undefined;
      this.#replyBase.set(key, base);
    }
    const full = await count(trimmed);
    if (full === undefined) return undefined;
    return Math.max(0, full - base + 1) + (trimmed.length < text.length ? 1 : 0);
  }

  /** OpenAI's `POST /v1/responses/input_tokens`: the input a create with this body bills. */
  responsesInput(target: UpstreamConfig, body: Record<string, unknown>): Promise<CountReply> {
    const url = `${baseUrl(target, this.#o.env)}/responses/input_tokens`;
    return this.#count(target, url, body, {});
  }

  async #count(
    target: UpstreamConfig,
    url: string,
    body: unknown,
    forwarded: Readonly<Record<string, string>>,
  ): Promise<CountReply> {
    const reply = await this.#post(target, url, body, forwarded);
    if (!reply.ok) return reply;
    const tokens = (reply.value as { input_tokens?: unknown }).input_tokens;
    if (typeof tokens === 'number' && Number.isSafeInteger(tokens) && tokens >= 0) {
      return Ok(tokens);
    }
    return Err(badReply('the upstream answered no input_tokens'));
  }

  async #post(
    target: UpstreamConfig,
    url: string,
    body: unknown,
    forwarded: Readonly<Record<string, string>> = {},
  ): Promise<Result<object, CountError>> {
    try {
      const res = await request(url, {
        method: 'POST',
        headers: upstreamHeaders(target, this.#o.env, forwarded),
        body: JSON.stringify(body),
        dispatcher: this.#o.agent,
        signal: AbortSignal.timeout(this.#o.timeoutMs ?? 2_000),
      });
      if (res.statusCode !== 200) {
        const message = await upstreamErrorMessage(res.body);
        this.#o.logger.warn(
          { upstream: target.id, url, status: res.statusCode, message },
          'upstream count refused',
        );
        return Err({ code: 'count_refused', status: res.statusCode, message });
      }
      const json: unknown = await res.body.json();
      if (typeof json === 'object' && json !== null) return Ok(json);
      return Err(badReply('the upstream answered no JSON object'));
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.#o.logger.warn({ upstream: target.id, url, err: message }, 'upstream count failed');
      return Err({ code: 'count_unreachable', status: null, message });
    }
  }
}

const badReply = (message: string): CountError => ({
  code: 'count_bad_reply',
  status: null,
  message,
});

/** The `error.message` of an upstream error body (OpenAI's and Anthropic's shapes), at most 64 KiB read. */
export async function upstreamErrorMessage(body: Dispatcher.ResponseData['body']): Promise<string> {
  try {
    const text = (await body.text()).slice(0, 65_536);
    const parsed = JSON.parse(text) as { error?: { message?: unknown } };
    const message = parsed.error?.message;
    return typeof message === 'string' ? message.slice(0, 1_000) : text.slice(0, 1_000);
  } catch {
    return '';
  }
}
