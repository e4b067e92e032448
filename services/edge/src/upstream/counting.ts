import { createHash } from 'node:crypto';
import type { UpstreamConfig } from '@holdfast/config';
import { Err, Ok, type Logger, type Result } from '@holdfast/runtime';
import { request, type Dispatcher } from 'undici';
import { baseUrl, rootUrl, upstreamHeaders } from './endpoint.js';
import { retryAfterMs } from './retry.js';

/**
 * Why an upstream's counting endpoint gave no count. `status` is the upstream's HTTP status
 * when it answered one (`count_refused`: a 4xx about the request itself means the call would
 * fail the same way); null when it could not be reached or answered nonsense. Two say the
 * count may work later: `count_busy`, the tenant already holds its share of the connections
 * to that upstream (nothing was sent), and `count_limited`, the upstream's counting endpoint
 * answered 429 (or did less than `retryAfterMs` ago, and was not asked again). A plain object:
 * the caller falls back to its own count, so nothing needs a stack.
 */
export interface CountError {
  code:
    | 'count_refused'
    | 'count_unreachable'
    | 'count_bad_reply'
    | 'no_upstream'
    | 'count_busy'
    | 'count_limited';
  status: number | null;
  message: string;
  /** count_limited: when the upstream said it counts again. */
  retryAfterMs?: number;
}

/**
 * Whose count it is: the tenant whose share of the connections it takes, and the check its
 * call makes before the first request to a provider's counting endpoint (count_tokens,
 * input_tokens, rate-limited for every team together; admission.ts beforeUpstreamCount: it
 * throws when the call is refused anyway; absent for a count alone).
 */
export interface CountFor {
  tenant: string;
  before?: (() => Promise<void>) | undefined;
}

/** What an upstream's counting endpoint said: a count, or why not. */
export type CountReply = Result<number, CountError>;

export interface UpstreamCounterOptions {
  agent: Dispatcher;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  timeoutMs?: number;
  /**
   * Takes one of the tenant's share of the connections to the upstream's origin (the share its
   * calls take too): the function that gives it back, or undefined when it holds its share.
   */
  take: (tenant: string, target: UpstreamConfig) => (() => void) | undefined;
  /** Told of each count not asked because the tenant held its share. */
  onBusy?: (tenant: string) => void;
  /** Told of each count the upstream's counting refused with 429, or was not asked since. */
  onLimited?: (upstream: string) => void;
  /**
   * Takes one request of the upstream's `countsPerMinute` for the tenant (the authority keeps
   * the minute for every edge): undefined to send it, or the count_limited error when the
   * tenant's share (or its priority's) is taken. Asked only of an upstream that declares one.
   */
  takeCount?: (tenant: string, target: UpstreamConfig) => Promise<CountError | undefined>;
}

/**
 * The counting endpoints of upstreams, for `tokenizer: upstream` and for state the edge
 * cannot see: llama-server's `/apply-template` + `/tokenize`, Anthropic's
 * `/v1/messages/count_tokens`, OpenAI's `/v1/responses/input_tokens`. Each count is asked
 * for a tenant and takes one of its share of the connections to that upstream, as a call
 * does: a tenant flooding counts cannot take the connections other tenants' calls need. An
 * upstream whose counting answered 429 is not asked again until its Retry-After has passed.
 */
export class UpstreamCounter {
  readonly #o: UpstreamCounterOptions;
  /** count_tokens of a '.' reply, by upstream and model (see replyText). */
  readonly #replyBase = new Map<string, number>();
  /** Until when each upstream's counting is rate-limited (epoch ms), by upstream id. */
  readonly #limitedUntil = new Map<string, number>();
  /** Messages counts of the last minute, by tenant and request. */
  readonly #recent = new RecentCounts(RECENT_COUNT_MS, RECENT_COUNTS);

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
    who: CountFor,
    body: Record<string, unknown>,
  ): Promise<number | undefined> {
    const { stream: _s, stream_options: _o, ...rendered } = body;
    const root = rootUrl(target, this.#o.env);
    // Not checked first (CountFor `before`): a llama-server counts for its own deployment, with
    // no limit every team shares, and each call of such a model would ask the authority twice.
    if (await this.#take(target, who.tenant)) return undefined;
    const prompt = await this.#post(target, who.tenant, `${root}/apply-template`, rendered);
    const text = prompt.ok ? (prompt.value as { prompt?: unknown }).prompt : undefined;
    return typeof text === 'string' ? this.#tokenize(target, who.tenant, text) : undefined;
  }

  /**
   * A text by llama-server's own tokenizer (`POST /tokenize`); undefined when it cannot say, or
   * when the tenant has taken its share of the upstream's `countsPerMinute`.
   */
  async tokenize(
    target: UpstreamConfig,
    tenant: string,
    text: string,
  ): Promise<number | undefined> {
    if (await this.#take(target, tenant)) return undefined;
    return this.#tokenize(target, tenant, text);
  }

  /** `POST /tokenize` itself (a chat prompt's second request: its count was taken). */
  async #tokenize(
    target: UpstreamConfig,
    tenant: string,
    text: string,
  ): Promise<number | undefined> {
    const root = rootUrl(target, this.#o.env);
    const reply = await this.#post(target, tenant, `${root}/tokenize`, {
      content: text,
      add_special: false,
    });
    const tokens = reply.ok ? (reply.value as { tokens?: unknown }).tokens : undefined;
    return Array.isArray(tokens) ? tokens.length : undefined;
  }

  /**
   * Anthropic's `POST /v1/messages/count_tokens` (`anthropic-version`/`-beta` forwarded). A
   * count is a function of the request alone (no state kept upstream), so the same request of
   * the same tenant within a minute is answered by the count already asked (or being asked):
   * an SDK retrying a refused call (the Anthropic client retries a 429 twice) or a team's
   * workers sending one document together ask the upstream once, and the refusal memory then
   * answers the repeats. Per tenant: no team can time another's prompts through it.
   */
  async messages(
    target: UpstreamConfig,
    who: CountFor,
    body: Record<string, unknown>,
    forwarded: Readonly<Record<string, string>>,
  ): Promise<CountReply> {
    const { tenant } = who;
    const url = `${rootUrl(target, this.#o.env)}/v1/messages/count_tokens`;
    const key = createHash('sha256')
      .update(`${tenant}\u0000${target.id}\u0000${JSON.stringify(forwarded)}\u0000`)
      .update(JSON.stringify(body))
      .digest('base64');
    const known = this.#recent.peek(key);
    if (known) return known;
    // Its own call's check, not shared: another call of the team may be refused for another key.
    await who.before?.();
    // The share is taken by the one count sent, not by each request that shares it.
    return this.#recent.get(key, async () => {
      const limited = await this.#take(target, tenant);
      return limited ? Err(limited) : this.#count(target, tenant, url, body, forwarded);
    });
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
    tenant: string,
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
      const r = await this.messages(target, { tenant }, { model, messages }, forwarded);
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
  async responsesInput(
    target: UpstreamConfig,
    who: CountFor,
    body: Record<string, unknown>,
  ): Promise<CountReply> {
    const url = `${baseUrl(target, this.#o.env)}/responses/input_tokens`;
    await who.before?.();
    const limited = await this.#take(target, who.tenant);
    if (limited) return Err(limited);
    return this.#count(target, who.tenant, url, body, {});
  }

  /**
   * One of the tenant's share of the upstream's `countsPerMinute` (`takeCount`), before a
   * request to its counting: the count_limited error when it is taken. Not while the
   * upstream's counting is rate-limited: no request is made then (#post says so). The call's
   * own check (CountFor `before`, which throws when the call is refused) comes first, always:
   * a refused call gets its refusal, recorded, whatever the upstream's state.
   */
  async #take(target: UpstreamConfig, tenant: string): Promise<CountError | undefined> {
    const until = this.#limitedUntil.get(target.id);
    if (until !== undefined && until > Date.now()) return undefined;
    if (target.countsPerMinute === undefined || !this.#o.takeCount) return undefined;
    const limited = await this.#o.takeCount(tenant, target);
    if (limited) this.#o.onLimited?.(target.id);
    return limited;
  }

  async #count(
    target: UpstreamConfig,
    tenant: string,
    url: string,
    body: unknown,
    forwarded: Readonly<Record<string, string>>,
  ): Promise<CountReply> {
    const reply = await this.#post(target, tenant, url, body, forwarded);
    if (!reply.ok) return reply;
    const tokens = (reply.value as { input_tokens?: unknown }).input_tokens;
    if (typeof tokens === 'number' && Number.isSafeInteger(tokens) && tokens >= 0) {
      return Ok(tokens);
    }
    return Err(badReply('the upstream answered no input_tokens'));
  }

  async #post(
    target: UpstreamConfig,
    tenant: string,
    url: string,
    body: unknown,
    forwarded: Readonly<Record<string, string>> = {},
  ): Promise<Result<object, CountError>> {
    const until = this.#limitedUntil.get(target.id);
    if (until !== undefined) {
      const left = until - Date.now();
      if (left > 0) {
        this.#o.onLimited?.(target.id);
        return Err(limited(target, left));
      }
      this.#limitedUntil.delete(target.id);
    }
    const giveBack = this.#o.take(tenant, target);
    if (!giveBack) {
      this.#o.onBusy?.(tenant);
      const message = `team ${tenant} already has its share of the connections to upstream ${target.id} open on this edge`;
      return Err({ code: 'count_busy', status: null, message });
    }
    try {
      const res = await request(url, {
        method: 'POST',
        headers: upstreamHeaders(target, this.#o.env, forwarded),
        body: JSON.stringify(body),
        dispatcher: this.#o.agent,
        signal: AbortSignal.timeout(this.#o.timeoutMs ?? 2_000),
      });
      if (res.statusCode === 429) {
        const wait = Math.min(retryAfterMs(res.headers) ?? 1_000, LIMITED_CAP_MS);
        this.#limitedUntil.set(target.id, Date.now() + wait);
        await res.body.dump();
        this.#o.logger.warn(
          { upstream: target.id, url, retryAfterMs: wait },
          'upstream count limited',
        );
        this.#o.onLimited?.(target.id);
        return Err(limited(target, wait));
      }
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
    } finally {
      giveBack();
    }
  }
}

/** How long a count answers the same request again, and how many are kept. */
const RECENT_COUNT_MS = 60_000;
const RECENT_COUNTS = 2_000;

/**
 * Counts by request for `ttlMs`: a request asked again gets the count of the first (its promise,
 * so requests made together share one count). A count that failed is not kept. At most `max`
 * (the oldest dropped first); each is a hash and a number.
 */
export class RecentCounts {
  readonly #entries = new Map<string, { until: number; reply: Promise<CountReply> }>();

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
  ) {}

  /** The count of this request kept or being asked, if any. */
  peek(key: string, now = Date.now()): Promise<CountReply> | undefined {
    const hit = this.#entries.get(key);
    return hit && hit.until > now ? hit.reply : undefined;
  }

  get(key: string, count: () => Promise<CountReply>, now = Date.now()): Promise<CountReply> {
    const hit = this.#entries.get(key);
    if (hit && hit.until > now) return hit.reply;
    this.#entries.delete(key);
    if (this.#entries.size >= this.max) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    const entry = { until: now + this.ttlMs, reply: count() };
    this.#entries.set(key, entry);
    void entry.reply.then((r) => {
      if (!r.ok && this.#entries.get(key) === entry) this.#entries.delete(key);
    });
    return entry.reply;
  }
}

/** The longest an upstream's 429 stops the edge asking it counts (a Retry-After of a day is its mistake). */
const LIMITED_CAP_MS = 60_000;

const limited = (target: UpstreamConfig, retryAfterMs: number): CountError => ({
  code: 'count_limited',
  status: 429,
  message: `upstream ${target.id} rate-limits its token counting for ${Math.ceil(retryAfterMs / 1_000)} s more`,
  retryAfterMs,
});

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
