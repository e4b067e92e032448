import { longContextPrices, tierPrices } from '@holdfast/config';
import { ItemId, MAX_ITEM_IDS } from '@holdfast/events';
import { Err, Ok } from '@holdfast/runtime';
import type { CountContext, Counted, Grant, SurfaceAdapter } from '../../call/adapter.js';
import { forwardedBody } from '../../call/forward.js';
import { longestCacheLifetime } from '../../call/unreported.js';
import {
  countUnseen,
  perToolReads,
  withProviderTool,
  type UnseenInput,
} from '../../call/unseen.js';
import { EdgeError, itemNotFound } from '../../errors.js';
import { sendError } from '../../plugins/errors.js';
import type { SseEvent } from '../../upstream/sse.js';
import { asChatPrompt } from './input.js';
import type { CountTokensRequest, MessagesRequest } from './schema.js';
import type { CountError } from '../../upstream/counting.js';
import { hiddenInput, messagesProviderTools } from './hidden.js';
import { walkFileIds, type NamedFiles } from '../file-ids.js';
import { MessagesTranscript } from './transcript.js';

/** The Messages fields the edge forwards as sent (max_tokens and stream it sets). */
const MESSAGES_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'system',
  'tools',
  'tool_choice',
  'thinking',
  'metadata',
  'stop_sequences',
  'temperature',
  'top_p',
  'top_k',
  'service_tier',
  'container',
  'mcp_servers',
  'context_management',
]);

/** Anthropic's smallest thinking.budget_tokens (the budget must also be below max_tokens). */
const THINKING_MIN_BUDGET = 1_024;

/** What Anthropic's count_tokens takes: the prompt side of the request. */
const COUNTED_FIELDS = [
  'messages',
  'system',
  'tools',
  'tool_choice',
  'thinking',
  'mcp_servers',
] as const;

/**
 * The prompt in the model's tokens: for `tokenizer: upstream`, Anthropic's own
 * `/v1/messages/count_tokens` (exact: what the call is billed); else, or when it cannot
 * answer, the local count of the chat request the prompt amounts to (the proven bound with
 * `estimate`) plus a bound on the input Anthropic adds that the request does not show (its
 * tool-use system prompt, the built-in tools' definitions, citations: hidden.ts).
 * `/v1/messages/count_tokens` answers this same count.
 */
export async function countMessagesPrompt(
  body: CountTokensRequest,
  ctx: CountContext,
): Promise<Counted> {
  const refused =
    compactEdit(body) ??
    advisorTool(body) ??
    unownedContainer(body) ??
    disguisedFile(body) ??
    tooManyFiles(body);
  if (refused) return Err(refused);
  const counted = await withProviderTool(messagesProviderTools(body), ctx.model, perToolReads, () =>
    countInput(body, ctx),
  );
  return counted.ok ? longContext(counted.value, ctx) : counted;
}

/**
 * A `context_management` edit that compacts (`compact_20260112`, beta `compact-2026-01-12`):
 * once the input reaches its trigger Anthropic runs an extra sampling step that reads the whole
 * context and writes a summary, then answers from the summary. Both are billed, and the
 * compaction's tokens are left out of the top-level usage (they are in `usage.iterations`,
 * which settlement sums), so the call can cost the prompt twice plus the summary on a hold of
 * the prompt and max_tokens once; with server tools it may compact several times. Refused
 * before anything is counted or held, as is any edit but those that only clear input
 * (`clear_tool_uses_*`, `clear_thinking_*`: a new kind is never taken as free); a compaction
 * block sent back costs no new compaction and goes on.
 */
const CLEARING_EDIT = /^clear_(tool_uses|thinking)_\w+$/;

function compactEdit(body: CountTokensRequest): EdgeError | undefined {
  const edits = (body as { context_management?: { edits?: unknown } | null }).context_management
    ?.edits;
  if (!Array.isArray(edits)) return undefined;
  const i = edits.findIndex((e) => {
    const type = (e as { type?: unknown } | null)?.type;
    return typeof type !== 'string' || !CLEARING_EDIT.test(type);
  });
  if (i < 0) return undefined;
  const type = (edits[i] as { type?: unknown } | null)?.type;
  return new EdgeError({
    code: 'invalid_request',
    param: `context_management.edits.${i}`,
    message:
      `This call asks for a context-management edit that is not a clearing one ` +
      `(context_management.edits.${i}${typeof type === 'string' ? `, ${type}` : ''}): a ` +
      `compaction makes Anthropic run an extra sampling step over the whole context, billed on ` +
      `top of the reply and more than the call's hold (its prompt and max_tokens once) can ` +
      `pay for. Only clear_tool_uses_* and clear_thinking_* edits are forwarded: compact on ` +
      `the client, or leave the edit out.`,
  });
}

/**
 * Anthropic's advisor tool (`advisor_20260301`, beta `advisor-tool-2026-03-01`): each call runs
 * a sub-inference on the advisor model the tool names (Opus), which reads the whole transcript
 * and writes its advice and thinking, billed at that model's rates and reported apart from the
 * executor's usage (an `advisor_message` entry of `usage.iterations`, with its model). No
 * price of the call's model states those rates, so it is refused like any cost the hold cannot
 * price, before anything is counted or held (a new version too: `advisor_*`).
 */
function advisorTool(body: CountTokensRequest): EdgeError | undefined {
  const i = (body.tools ?? []).findIndex(
    (t) => typeof t.type === 'string' && t.type.toLowerCase().startsWith('advisor_'),
  );
  if (i < 0) return undefined;
  return new EdgeError({
    code: 'invalid_request',
    param: `tools.${i}`,
    message:
      `This call offers the ${body.tools?.[i]?.type} tool (tools.${i}): each use runs the ` +
      `advisor model over the whole conversation, billed at that model's rates, which the ` +
      `price of model ${body.model} does not state, so its budget could not hold it. Leave ` +
      `the tool out, or call the advisor model as a call of its own.`,
  });
}

/**
 * The code execution container a call names to reuse (`container`: its id, or an object with
 * its id), whose files and state the provider keeps for whoever names it: every team goes
 * through the same upstream account, so a call reusing one is admitted only for the team whose
 * call made it (Asked.itemIds; its settle recorded it: MessagesTranscript.storedItemIds).
 */
function namedContainer(body: Pick<CountTokensRequest, 'container'>): string | undefined {
  const c = body.container;
  const id = typeof c === 'string' ? c : c?.id;
  return id ?? undefined;
}

/** A container id no call could have stored (not an ItemId): no team owns it. */
function unownedContainer(body: CountTokensRequest): EdgeError | undefined {
  const id = namedContainer(body);
  return id !== undefined && !ItemId.safeParse(id).success
    ? itemNotFound(id, 'container')
    : undefined;
}

/**
 * The files the request reads by id, each once, by their kind (file-ids.ts): every `file_id` of
 * its messages and system blocks, however nested (a `container_upload`, a `document` or `image`
 * whose source is `{type: "file", file_id}`, in a message, a tool result or a document's own
 * content, a code execution result's files sent back), but a tool call's `input` (its
 * arguments, which the provider never reads as a file). The provider keeps a file for every
 * team of the upstream account, so an owned one (`file_`, ItemId) another team's code execution
 * output made is refused (Asked.itemIds; its settle recorded it:
 * MessagesTranscript.storedItemIds); a disguised one (a space, an invisible character, width or
 * case from an owned one) is refused as unknown, never sent; any other is the operator's.
 */
function namedFiles(body: Pick<CountTokensRequest, 'messages' | 'system'>): NamedFiles {
  let named = NAMED_FILES.get(body);
  if (!named) NAMED_FILES.set(body, (named = walkFileIds([body.messages, body.system], toolInput)));
  return named;
}

/** namedFiles' answer per body: a call asks it for its admit and its count. */
const NAMED_FILES = new WeakMap<object, NamedFiles>();

/** A tool call's arguments (`tool_use`, `server_tool_use`, `mcp_tool_use`: its `input`). */
const toolInput = (o: Record<string, unknown>, key: string) =>
  key === 'input' && typeof o.type === 'string' && o.type.endsWith('tool_use');

/** A disguised file id: no call made it, so it is refused as an unknown file, never sent. */
function disguisedFile(body: CountTokensRequest): EdgeError | undefined {
  const { disguised } = namedFiles(body);
  return disguised === undefined ? undefined : itemNotFound(disguised, 'messages-file');
}

/** The container and the files the call names by id (Asked.itemIds): the first MAX_ITEM_IDS. */
function namedStored(body: CountTokensRequest): { itemIds?: string[] } {
  const container = namedContainer(body);
  const ids = [...(container === undefined ? [] : [container]), ...namedFiles(body).ids];
  return ids.length === 0 ? {} : { itemIds: ids.slice(0, MAX_ITEM_IDS) };
}

/** More files named than an admit checks (namedStored keeps the first MAX_ITEM_IDS). */
function tooManyFiles(body: CountTokensRequest): EdgeError | undefined {
  const n = (namedContainer(body) === undefined ? 0 : 1) + namedFiles(body).ids.length;
  if (n <= MAX_ITEM_IDS) return undefined;
  const message = `messages name more than ${MAX_ITEM_IDS} files by file_id (with the container). Send fewer in one call.`;
  return new EdgeError({ code: 'invalid_request', message, param: 'messages' });
}

/**
 * Anthropic's long-context window (the `context-1m-*` beta) bills a request whose input is
 * above 200,000 tokens at its long-context rates, all of it: 2x the input price and 1.5x the
 * output price on Sonnet. A model whose tier prices it (`price.longContext`, its line at most
 * the count) is held and billed at that price by the authority (docs/budgets.md, "How long
 * context is priced"); on any other such a call could cost up to twice what its `usd` budget
 * allows, so it is refused. The count is exact (count_tokens) or an upper bound, so a call
 * counted at or under the line is under it and is billed at the standard rates.
 */
const LONG_CONTEXT_ABOVE_TOKENS = 200_000;
const LONG_CONTEXT_BETA = /^context-1m-/;

function longContext(prompt: number, ctx: CountContext): Counted {
  const beta = ctx.headers['anthropic-beta'];
  if (prompt <= LONG_CONTEXT_ABOVE_TOKENS || beta === undefined) return Ok(prompt);
  const flags = beta.split(',').map((f) => f.trim().toLowerCase());
  if (!flags.some((f) => LONG_CONTEXT_BETA.test(f))) return Ok(prompt);
  if (ctx.model && longContextPrices(ctx.model, ctx.serviceTier, prompt)) return Ok(prompt);
  return Err(
    new EdgeError({
      code: 'invalid_request',
      param: 'anthropic-beta',
      message:
        `This call asks for the long-context window (anthropic-beta: context-1m) with ` +
        `${prompt} input tokens, above ${LONG_CONTEXT_ABOVE_TOKENS}: Anthropic bills such a ` +
        `request at its long-context rates, which model ${ctx.model?.id ?? 'this model'} does ` +
        `not price at service tier ${ctx.serviceTier} (price.longContext, docs/configuration.md), ` +
        `so its budget could not hold. Send at most ${LONG_CONTEXT_ABOVE_TOKENS} input tokens.`,
    }),
  );
}

async function countInput(body: CountTokensRequest, ctx: CountContext): Promise<Counted> {
  const upstreamModel = ctx.model?.upstreamModel ?? ctx.model?.id ?? body.model;
  let why = 'the model is not counted by its upstream (its tokenizer is not upstream)';
  let failed: CountError | undefined;
  if (ctx.target) {
    const counted: Record<string, unknown> = { model: upstreamModel };
    for (const field of COUNTED_FIELDS) if (body[field] != null) counted[field] = body[field];
    const reply = await ctx.deps.upstream.count.messages(
      ctx.target,
      ctx.countFor,
      counted,
      ctx.headers,
    );
    if (reply.ok) return Ok(reply.value);
    failed = reply.error;
    why = `the upstream's /v1/messages/count_tokens could not count it (${failed.status === null ? failed.message : `it answered ${failed.status}`})`;
  }
  const hidden = hiddenInput(body, ctx.model);
  const local = async () =>
    hidden +
    (await ctx.deps.counter.countChat(asChatPrompt(body, upstreamModel), ctx.tokenizer, ctx.owner));
  const [document, ...more] = documentBlocks(body);
  if (document) return countUnseen([document, ...more], local, ctx.model, why, failed);
  return Ok(await local());
}

/** The `document` blocks (a PDF inline, by URL or by file id), tool results' included. */
function documentBlocks(body: CountTokensRequest): UnseenInput[] {
  const find = (blocks: unknown, at: string): UnseenInput[] =>
    Array.isArray(blocks)
      ? (blocks as { type?: unknown; content?: unknown }[]).flatMap((block, j) => {
          if (block.type === 'document') return [{ param: `${at}.${j}`, what: 'a document block' }];
          return block.type === 'tool_result' ? find(block.content, `${at}.${j}.content`) : [];
        })
      : [];
  return body.messages.flatMap((message, i) => find(message.content, `messages.${i}.content`));
}

/**
 * Anthropic serves `service_tier: "auto"` (its default when none is sent) from Priority Tier
 * capacity when the organisation has it, and reports `usage.service_tier: "priority"`. A model
 * that prices no `priority` tier is held at the standard price, and a priority report it cannot
 * price would be billed at the tier held, under the provider's bill: such a call is sent as
 * `standard_only`, which Anthropic serves at the standard tier (docs/budgets.md, "How service
 * tiers are priced"). A model that prices `priority` is held at it and sent as asked.
 */
function pinnedServiceTier(body: MessagesRequest, grant: Grant): { service_tier?: string } {
  const asked = body.service_tier ?? 'auto';
  return asked === 'auto' && tierPrices(grant.model, 'priority') === undefined
    ? { service_tier: 'standard_only' }
    : {};
}

/**
 * What goes upstream: the known fields, always streamed, max_tokens the grant. Extended
 * thinking spends its budget inside max_tokens and Anthropic requires the budget below it,
 * so a budget the clamp left at or above the grant is lowered to just below it.
 */
function upstreamBody(body: MessagesRequest, grant: Grant) {
  const thinking = body.thinking;
  const budget = thinking?.type === 'enabled' ? thinking.budget_tokens : undefined;
  const lowered =
    typeof budget === 'number' && budget >= grant.maxOutput
      ? { ...thinking, budget_tokens: grant.maxOutput - 1 }
      : undefined;
  return forwardedBody(body, {
    known: MESSAGES_FIELDS,
    passThrough: grant.upstream.passThrough,
    set: {
      model: grant.model.upstreamModel ?? grant.model.id,
      max_tokens: grant.maxOutput,
      stream: true,
      ...(lowered ? { thinking: lowered } : {}),
      ...pinnedServiceTier(body, grant),
    },
  });
}

/** A whole `message` as the events a stream of it would have been. */
function asEvents(json: unknown): SseEvent[] {
  const { content, stop_reason, stop_sequence, usage, ...message } = (json ?? {}) as Record<
    string,
    unknown
  >;
  const event = (type: string, data: object): SseEvent => ({
    event: type,
    data: JSON.stringify({ type, ...data }),
  });
  const out = [event('message_start', { message: { ...message, content: [], usage } })];
  const blocks = Array.isArray(content) ? (content as Record<string, unknown>[]) : [];
  blocks.forEach((b, index) => {
    const { text, thinking, input, ...rest } = b;
    let start: object = b;
    let delta: object | undefined;
    if (b.type === 'text') {
      [start, delta] = [
        { ...rest, text: '' },
        { type: 'text_delta', text },
      ];
    } else if (b.type === 'thinking') {
      [start, delta] = [
        { ...rest, thinking: '' },
        { type: 'thinking_delta', thinking },
      ];
    } else if (input !== undefined) {
      const partial_json = JSON.stringify(input);
      [start, delta] = [
        { ...rest, input: {} },
        { type: 'input_json_delta', partial_json },
      ];
    }
    out.push(event('content_block_start', { index, content_block: start }));
    if (delta) out.push(event('content_block_delta', { index, delta }));
    out.push(event('content_block_stop', { index }));
  });
  out.push(event('message_delta', { delta: { stop_reason, stop_sequence }, usage }));
  out.push(event('message_stop', {}));
  return out;
}

/** `POST /v1/messages`, for models on an `api: anthropic` upstream. */
export const messagesAdapter: SurfaceAdapter<MessagesRequest> = {
  name: 'messages',
  apis: ['anthropic'],
  path: '/v1/messages',
  forwardHeaders: ['anthropic-version', 'anthropic-beta'],
  extensible: true,
  streamUpstream: true,
  asked: (body) => ({
    model: body.model,
    maxOutput: body.max_tokens,
    choices: 1,
    stream: body.stream === true,
    endUser: body.metadata?.user_id ?? null,
    serviceTier: body.service_tier,
    reasoning: body.thinking != null && body.thinking.type !== 'disabled',
    ...namedStored(body),
    tools: {
      per: 'tool',
      tools: (body.tools ?? []).flatMap((t, i) =>
        typeof t.type === 'string'
          ? [{ type: t.type, param: `tools.${i}`, maxUses: t.max_uses }]
          : [],
      ),
    },
  }),
  cacheWrites: longestCacheLifetime,
  minOutput: (body) =>
    body.thinking?.type === 'enabled'
      ? {
          tokens: THINKING_MIN_BUDGET + 1,
          why: `Extended thinking needs max_tokens above its smallest budget, ${THINKING_MIN_BUDGET} tokens`,
          param: 'max_tokens',
        }
      : undefined,
  countPrompt: countMessagesPrompt,
  upstreamBody,
  transcript: (body) => new MessagesTranscript({ model: body.model }),
  asEvents,
  sendError,
};
