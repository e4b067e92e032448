import { ItemId, MAX_ITEM_IDS } from '@holdfast/events';
import { Err, Ok } from '@holdfast/runtime';
import type { CountContext, Counted, Grant, SurfaceAdapter } from '../../call/adapter.js';
import { forwardedBody } from '../../call/forward.js';
import {
  countUnseen,
  perCallReads,
  responsesProviderTools,
  withProviderTool,
  type ProviderTool,
} from '../../call/unseen.js';
import { EdgeError, itemNotFound } from '../../errors.js';
import { sendError } from '../../plugins/errors.js';
import { bodyEndUser } from '../../request/end-user.js';
import type { SseEvent } from '../../upstream/sse.js';
import type { CountError } from '../../upstream/counting.js';
import { asChatPrompt, namedFiles, referencedItems, toolContainers, unseenState } from './input.js';
import type { ResponsesRequest } from './schema.js';
import { ResponsesTranscript } from './transcript.js';

/** The Responses fields the edge forwards as sent (max_output_tokens and stream it sets). */
const RESPONSES_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'max_tool_calls',
  'stream_options',
  'previous_response_id',
  'conversation',
  'prompt',
  'reasoning',
  'text',
  'store',
  'user',
  'safety_identifier',
  'metadata',
  'parallel_tool_calls',
  'temperature',
  'top_p',
  'top_logprobs',
  'truncation',
  'include',
  'service_tier',
  'prompt_cache_key',
  'prompt_cache_retention',
]);

/** What OpenAI's input_tokens endpoint counts: the request without output settings. */
const COUNTED_FIELDS = [
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'previous_response_id',
  'conversation',
  'prompt',
  'reasoning',
  'text',
  'parallel_tool_calls',
  'truncation',
] as const;

/**
 * Upstream statuses that say the request itself is wrong (the call would fail the same way).
 * Not 404/405/501 ("no such endpoint here"), 401/403 (the edge's key) or 408: the upstream
 * could not count it, not a fault of the call's (429 is `count_limited`).
 */
const REQUEST_REFUSED = new Set([400, 409, 413, 422]);

/**
 * The input in the model's tokens. With input only the upstream can count (state it keeps,
 * files, reasoning it sealed or keeps, what its tools read: input.ts `unseenState`), its `POST
 * /v1/responses/input_tokens` counts the call. An upstream without one refuses the call with a
 * 400 that says why, unless the model states an allowance for each such input
 * (`upstreamStateAllowanceTokens`). Otherwise the input is counted locally as the chat request
 * it amounts to (input.ts), by the upstream's template for `tokenizer: upstream`.
 */
async function countPrompt(body: ResponsesRequest, ctx: CountContext): Promise<Counted> {
  if (body.background) {
    const message =
      'background: true runs the response after this request returns, where Holdfast cannot count or end it. Stream it instead.';
    return Err(new EdgeError({ code: 'invalid_request', message, param: 'background' }));
  }
  if (body.conversation != null) {
    // Every tenant goes through the same upstream account: a conversation id opens whatever
    // any of them stored there, and Holdfast, which does not serve the Conversations API,
    // cannot know whose a conversation is (previous_response_id it can: admission checks it).
    const message =
      'conversation is not supported: Holdfast cannot tell which team a provider-side conversation belongs to. Chain responses with previous_response_id, or send the conversation as input.';
    return Err(new EdgeError({ code: 'invalid_request', message, param: 'conversation' }));
  }
  const { disguised } = namedFiles(body);
  // No call wrote a file under such an id: refused as an unknown one, never sent.
  if (disguised !== undefined) return Err(itemNotFound(disguised, 'file'));
  const referenced = referencedItems(body);
  const unowned = referenced.find((id) => !ItemId.safeParse(id).success);
  if (unowned !== undefined) {
    // No call stores an item under such an id (ItemId), so no tenant owns it.
    return Err(itemNotFound(unowned, toolContainers(body).includes(unowned) ? 'tools' : undefined));
  }
  if (referenced.length > MAX_ITEM_IDS) {
    const message = `input reads more than ${MAX_ITEM_IDS} stored items by id (item_reference, reasoning items without their content, any item that carries its id unless store is false, encrypted_content, containers, files its code wrote). Send the items themselves without their ids, or continue with previous_response_id, instead.`;
    return Err(new EdgeError({ code: 'invalid_request', message, param: 'input' }));
  }
  const audio = ctx.model && audioPart(body);
  if (audio && ctx.model && ctx.model.pricePico.audioInput > ctx.model.pricePico.input) {
    const message =
      `This call sends audio (${audio}), which ${ctx.model.id} bills at its audio input price, ` +
      `but a Responses usage does not say how many of its input tokens were audio: Holdfast ` +
      `would bill them as text, under what the provider charges. Send audio on ` +
      `/v1/chat/completions, which bills it at the audio price.`;
    return Err(new EdgeError({ code: 'invalid_request', message, param: audio }));
  }
  return withProviderTool(
    [...responsesProviderTools(body.tools), ...storedPromptTools(body)],
    ctx.model,
    (tools) => perCallReads(tools, body.max_tool_calls),
    () => countInput(body, ctx),
  );
}

/**
 * A stored prompt (`prompt: {id}`) may carry tools the provider runs, which the request does
 * not show: what they read is held like the request's own tools' reads, one allowance for
 * each call `max_tool_calls` permits (docs/budgets.md, "How unseen tool input is held").
 */
function storedPromptTools(body: ResponsesRequest): ProviderTool[] {
  if (body.prompt == null) return [];
  return [{ param: 'prompt', what: 'the tools a stored prompt may carry', counted: true }];
}

/** The first audio part of the input (`input[i].content[j]`), if it sends any. */
function audioPart(body: ResponsesRequest): string | undefined {
  if (typeof body.input === 'string' || !body.input) return undefined;
  for (const [i, item] of body.input.entries()) {
    for (const field of ['content', 'output'] as const) {
      const parts = item[field];
      if (!Array.isArray(parts)) continue;
      const j = parts.findIndex((part) => part.type === 'input_audio');
      if (j >= 0) return `input.${i}.${field}.${j}`;
    }
  }
  return undefined;
}

async function countInput(body: ResponsesRequest, ctx: CountContext): Promise<Counted> {
  const upstreamModel = ctx.model?.upstreamModel ?? ctx.model?.id ?? body.model;
  const chat = asChatPrompt(body, upstreamModel);
  const local = async () => {
    const counted =
      ctx.target &&
      (await ctx.deps.upstream.count.chatPrompt(ctx.target, ctx.countFor, { ...chat }));
    return counted ?? (await ctx.deps.counter.countChat(chat, ctx.tokenizer, ctx.owner));
  };
  const [first, ...more] = unseenState(body);
  if (first === undefined) return Ok(await local());
  const upstream = ctx.upstream;
  const counted = upstream
    ? await ctx.deps.upstream.count.responsesInput(
        upstream,
        ctx.countFor,
        countedBody(body, upstreamModel),
      )
    : Err<CountError>({ code: 'no_upstream', status: null, message: 'the model has no upstream' });
  if (counted.ok) return Ok(counted.value);
  const { error } = counted;
  if (error.code === 'count_refused' && REQUEST_REFUSED.has(error.status ?? 0)) {
    // The upstream read the request and found it wrong: the call would fail the same way.
    const message = `The upstream rejected the request: ${error.message}`;
    return Err(new EdgeError({ code: 'invalid_request', message }));
  }
  const answer =
    error.status === null ? error.message : `it answered ${error.status}: ${error.message}`;
  const why = `the upstream could not count it with POST /v1/responses/input_tokens (${answer})`;
  return countUnseen([first, ...more], local, ctx.model, why, error);
}

function countedBody(body: ResponsesRequest, model: string): Record<string, unknown> {
  const out: Record<string, unknown> = { model };
  for (const field of COUNTED_FIELDS) if (body[field] != null) out[field] = body[field];
  return out;
}

/** What goes upstream: the known fields, always streamed, max_output_tokens the grant. */
function upstreamBody(body: ResponsesRequest, grant: Grant) {
  return forwardedBody(body, {
    known: RESPONSES_FIELDS,
    passThrough: grant.upstream.passThrough,
    set: {
      model: grant.model.upstreamModel ?? grant.model.id,
      max_output_tokens: grant.maxOutput,
      stream: true,
    },
  });
}

/** A whole `response` object as the events a stream of it ends with (each item done). */
function asEvents(json: unknown): SseEvent[] {
  const response = (json ?? {}) as { output?: unknown };
  const items = Array.isArray(response.output) ? (response.output as unknown[]) : [];
  const event = (type: string, data: object): SseEvent => ({
    event: type,
    data: JSON.stringify({ type, ...data }),
  });
  const status = (response as { status?: unknown }).status;
  const terminal = status === 'incomplete' ? 'response.incomplete' : 'response.completed';
  return [
    ...items.map((item, output_index) =>
      event('response.output_item.done', { output_index, item }),
    ),
    event(status === 'failed' ? 'response.failed' : terminal, { response }),
  ];
}

/** The stored items the call reads by id (input.ts `referencedItems`), if any. */
function itemIds(body: ResponsesRequest): { itemIds?: string[] } {
  const ids = referencedItems(body);
  return ids.length > 0 ? { itemIds: ids } : {};
}

/** `POST /v1/responses`. */
export const responsesAdapter: SurfaceAdapter<ResponsesRequest> = {
  name: 'responses',
  apis: ['openai'],
  path: '/responses',
  extensible: true,
  streamUpstream: true,
  asked: (body) => ({
    model: body.model,
    maxOutput: body.max_output_tokens ?? null,
    choices: 1,
    stream: body.stream === true,
    endUser: bodyEndUser(body.user, body.safety_identifier),
    serviceTier: body.service_tier,
    reasoning: body.reasoning != null && body.reasoning.effort !== 'none',
    tools: {
      per: 'call',
      tools: (body.tools ?? []).map((t, i) => ({
        type: t.type,
        param: `tools.${i}`,
        partialImages: (t as { partial_images?: unknown }).partial_images,
      })),
      maxToolCalls: body.max_tool_calls,
      storedPrompt: body.prompt != null,
    },
    ...(body.previous_response_id ? { previousResponseId: body.previous_response_id } : {}),
    ...itemIds(body),
  }),
  minOutput: () => ({
    tokens: 16,
    why: 'The Responses API takes max_output_tokens of at least 16',
    param: 'max_output_tokens',
  }),
  countPrompt,
  upstreamBody,
  transcript: (body) => new ResponsesTranscript({ model: body.model, store: body.store !== false }),
  asEvents,
  sendError,
};
