import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { planCache, promptSegments } from '../anthropic/count.js';
import {
  anthropicUsage,
  contentBlocks,
  generate,
  messageObject,
  type MessagesOutput,
  outputTokens,
} from '../anthropic/output.js';
import { CountTokensBody, MessagesBody } from '../anthropic/schema.js';
import { streamMessage } from '../anthropic/stream.js';
import { startCall } from '../call.js';
import { hash32 } from '../generate.js';
import { readRequest } from '../request.js';
import type { MockState } from '../state.js';
import { servedTier } from '../tiers.js';
import { messagesToolInput, messagesToolUses, serverToolBlocks } from '../server-tools.js';
import { ANTHROPIC, sendError } from '../surface.js';
import { replyShape } from '../vendor.js';

/** The API requires its version header; the SDK always sends it. */
function versioned(request: FastifyRequest, reply: FastifyReply): boolean {
  if (typeof request.headers['anthropic-version'] === 'string') return true;
  void sendError(reply, ANTHROPIC, 'invalid', 'anthropic-version: header is required');
  return false;
}

const invalid = (reply: FastifyReply, message: string) =>
  sendError(reply, ANTHROPIC, 'invalid', message);

/**
 * Anthropic's Messages API: `POST /v1/messages` (JSON or SSE) and `POST
 * /v1/messages/count_tokens`, which answers the input a create with the same body is billed
 * (input_tokens + cache_creation_input_tokens + cache_read_input_tokens). Prompt caching follows
 * `cache_control` (anthropic/count.ts); errors are in Anthropic's shape and statuses (400, 401,
 * 404, 429 with retry-after, 500 api_error, 529 overloaded_error).
 */
export function registerMessages(app: FastifyInstance, state: MockState): void {
  app.post('/v1/messages', async (request, reply) => {
    if (!versioned(request, reply)) return reply;
    const read = readRequest(MessagesBody, request, reply, state, ANTHROPIC);
    if (!read) return reply;
    const { body, plan } = read;
    const maxOutput = state.behaviour.maxOutputTokens;
    if (body.max_tokens > maxOutput) {
      return invalid(
        reply,
        `max_tokens: ${body.max_tokens} > ${maxOutput}, which is the maximum allowed number of output tokens for ${body.model}`,
      );
    }
    const budget = body.thinking?.type === 'enabled' ? body.thinking.budget_tokens : undefined;
    if (body.thinking?.type === 'enabled' && (budget === undefined || budget >= body.max_tokens)) {
      return invalid(reply, '`max_tokens` must be greater than `thinking.budget_tokens`');
    }
    const tool = body.tool_choice?.type === 'tool' ? body.tool_choice.name : undefined;
    if (tool !== undefined && !(body.tools ?? []).some((t) => t.name === tool)) {
      return invalid(reply, `tool_choice: tool '${tool}' is not in tools`);
    }
    const shaped = replyShape({
      body,
      surfaceMax: body.max_tokens,
      surfaceField: 'max_tokens',
      n: 1,
      counts: false,
      serverMax: maxOutput,
    });
    if (!shaped.ok) return invalid(reply, `${shaped.error.param}: ${shaped.error.message}`);
    const counted = await promptSegments(body, plan.toolPrompt);
    if (!counted.ok) return invalid(reply, counted.error.message);
    const cache = planCache(
      body.model,
      counted.value.segments,
      state.promptCache,
      state.behaviour.promptCacheMinTokens,
    );

    const stream = body.stream === true;
    const toolUses = messagesToolUses(body, plan);
    const toolInput = messagesToolInput(body, toolUses, plan.toolInputTokens);
    const call = startCall(
      state,
      reply,
      ANTHROPIC,
      {
        route: 'messages',
        model: body.model,
        stream,
        includeUsage: true,
        maxTokens: body.max_tokens,
        outputCap: shaped.value.cap,
        vendorFields: shaped.value.vendorFields,
        choices: 1,
        candidates: 1,
        endUser: body.metadata?.user_id ?? null,
        serviceTier: servedTier(body.service_tier, 'anthropic', plan, state),
        longContextAbove: plan.longContextAbove,
        // Server tools read more input than the request shows (never in count_tokens).
        prompt: { ...cache.prompt, tokens: cache.prompt.tokens + toolInput },
        toolUses,
      },
      plan,
    );
    if (!call || (await call.failBeforeResponse())) return reply;
    // The prompt reached the model: what it read and wrote in the cache is now so.
    cache.commit();

    const seed = hash32(
      `${body.model}\n${JSON.stringify([body.system, body.messages])}`,
      state.behaviour.seed,
    );
    const uses = serverToolBlocks(call.id, call.info.toolUses ?? {});
    const out = await generate(call.id, body, shaped.value, plan, seed, uses);
    if (stream) {
      await streamMessage(call, plan, body.model, out);
      return reply;
    }
    const { output, reasoning } = outputTokens(out);
    if (!(await call.wait(plan.firstTokenLatencyMs + plan.tokenDelayMs * output))) {
      // The model finished the message anyway, so a provider bills all of it.
      call.finish('aborted', output, null, false, reasoning);
      reply.hijack();
      return reply;
    }
    call.finish('completed', output, out.stopReason, true, reasoning);
    const usage = anthropicUsage(call.usage(output, reasoning), out.thinking !== null);
    return reply
      .headers({ ...call.headers, 'request-id': call.id })
      .send(messageObject(call.id, body.model, withServerTools(out), out, usage));
  });

  app.post('/v1/messages/count_tokens', async (request, reply) => {
    if (!versioned(request, reply)) return reply;
    const read = readRequest(CountTokensBody, request, reply, state, ANTHROPIC);
    if (!read) return reply;
    return state.counting.run(reply, ANTHROPIC, async () => {
      const counted = await promptSegments(read.body, read.plan.toolPrompt);
      if (!counted.ok) return invalid(reply, counted.error.message);
      return { input_tokens: counted.value.total };
    });
  });
}

/** A message's content blocks with its server tool uses' blocks after the thinking. */
function withServerTools(out: MessagesOutput): object[] {
  const blocks = contentBlocks(out);
  const uses = out.serverTools.flatMap((u) => [
    { ...u.call, input: JSON.parse(u.input.partial_json) as unknown },
    u.result,
  ]);
  blocks.splice(out.thinking ? 1 : 0, 0, ...uses);
  return blocks;
}
