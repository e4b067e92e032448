import type { PromptMessage } from '@holdfast/tokenizer';
import { loadTokenizer } from '@holdfast/tokenizer';
import type { FastifyInstance } from 'fastify';
import { startCall, type ModelCall } from '../call.js';
import { completionPieces, hash32, reasoningFor, toolArguments } from '../generate.js';
import { sendInvalid } from '../openai.js';
import type { Plan } from '../plan.js';
import { readRequest } from '../request.js';
import { countInput, type InputRefusal } from '../responses/input.js';
import {
  approvalItem,
  outputItems,
  reasoningItem,
  responseObject,
  responsesUsage,
  visibleItem,
  visibleTokens,
  type ResponsesOutput,
} from '../responses/objects.js';
import { InputTokensBody, ResponsesBody } from '../responses/schema.js';
import type { ContextEntry } from '../responses/store.js';
import { streamResponse } from '../responses/stream.js';
import type { MockState } from '../state.js';
import { responsesToolInput, responsesToolUses, toolCallItems } from '../server-tools.js';
import { OPENAI, sendError } from '../surface.js';
import { servedTier } from '../tiers.js';
import { uncachedPrompt } from '../usage.js';
import { candidateLength, replyShape, type ReplyShape } from '../vendor.js';
import { describeIssue } from './schemas.js';

/**
 * OpenAI's Responses API: `POST /v1/responses` (JSON or typed SSE events), the input token
 * count `POST /v1/responses/input_tokens` (exactly the input a create with the same body is
 * billed), and `GET`/`DELETE /v1/responses/:id` for stored responses. Responses are stored in
 * memory unless `store: false`, so `previous_response_id` bills the prior conversation as input.
 */
export function registerResponses(app: FastifyInstance, state: MockState): void {
  app.post('/v1/responses', async (request, reply) => {
    const read = readRequest(ResponsesBody, request, reply, state);
    if (!read) return reply;
    const { body, plan } = read;
    const shaped = replyShape({
      body,
      surfaceMax: body.max_output_tokens ?? null,
      surfaceField: 'max_output_tokens',
      n: 1,
      counts: false,
      serverMax: state.behaviour.maxOutputTokens,
    });
    if (!shaped.ok) return sendInvalid(reply, shaped.error.message, shaped.error.param);
    const counted = await countInput(body, { store: state.responses, seal: state.seal });
    if (!counted.ok) return refuse(reply, counted.error);

    const stream = body.stream === true;
    const toolUses = responsesToolUses(body, plan);
    const call = startCall(
      state,
      reply,
      OPENAI,
      {
        route: 'responses',
        model: body.model,
        stream,
        includeUsage: true,
        maxTokens: body.max_output_tokens ?? null,
        outputCap: shaped.value.cap,
        vendorFields: shaped.value.vendorFields,
        choices: 1,
        candidates: 1,
        endUser: body.user ?? body.safety_identifier ?? null,
        serviceTier: servedTier(body.service_tier, 'openai', plan, state),
        longContextAbove: plan.longContextAbove,
        // Provider-run tools read more input than the request shows (never in input_tokens).
        prompt: {
          ...uncachedPrompt(
            counted.value.tokens + responsesToolInput(body.tools, toolUses, plan.toolInputTokens),
          ),
          cached: Math.min(plan.cachedTokens, counted.value.tokens),
        },
        toolUses,
      },
      plan,
    );
    if (!call || (await call.failBeforeResponse())) return reply;

    const out = await generate(call, state, body, shaped.value, plan);
    if ((call.info.toolUses?.code_interpreter ?? 0) > 0) {
      // Its code wrote a file in its container, which the message cites.
      out.files = [{ containerId: `cntr_${call.id}`, fileId: `cfile_${call.id}_0` }];
    }
    const mcp = approvalAsked(body);
    if (mcp !== undefined) out.approval = { id: `mcpr_${call.id}`, serverLabel: mcp };
    const createdAt = Math.floor(Date.now() / 1000);
    const finalize = () => {
      const output = visibleTokens(out) + out.reasoning;
      const response = responseObject(call.id, body, createdAt, call.info.serviceTier, {
        status: out.incomplete ? 'incomplete' : 'completed',
        output: [...toolCallItems(call.id, call.info.toolUses ?? {}), ...outputItems(call.id, out)],
        usage: responsesUsage(call.usage(output, out.reasoning)),
      });
      if (body.store !== false) {
        const items = outputEntries(call.id, out);
        state.responses.put(response.id, {
          response,
          conversation: [...counted.value.conversation, ...[...items.values()].flat()],
          items,
          follows: reasoningFollowed(call.id, out),
        });
      }
      return response;
    };
    if (stream) {
      await streamResponse(call, plan, body, out, createdAt, finalize);
      return reply;
    }
    const output = visibleTokens(out) + out.reasoning;
    if (!(await call.wait(plan.firstTokenLatencyMs + plan.tokenDelayMs * output))) {
      // The model finished the response anyway, so a provider bills all of it.
      call.finish('aborted', output, null, false, out.reasoning);
      reply.hijack();
      return reply;
    }
    const response = finalize();
    call.finish('completed', output, response.status, true, out.reasoning);
    return reply.headers({ ...call.headers, 'x-request-id': call.id }).send(response);
  });

  app.post('/v1/responses/input_tokens', async (request, reply) => {
    if (!state.behaviour.responsesInputTokens) {
      const message = 'Invalid URL (POST /v1/responses/input_tokens)';
      return sendError(reply, OPENAI, 'not_found', message);
    }
    const parsed = InputTokensBody.safeParse(request.body ?? {});
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendInvalid(reply, message, param);
    }
    return state.counting.run(reply, OPENAI, async () => {
      const counted = await countInput(parsed.data, { store: state.responses, seal: state.seal });
      if (!counted.ok) return refuse(reply, counted.error);
      return { object: 'response.input_tokens', input_tokens: counted.value.tokens };
    });
  });

  app.get<{ Params: { id: string } }>('/v1/responses/:id', (request, reply) => {
    const stored = state.responses.get(request.params.id);
    if (stored) return stored.response;
    return sendError(
      reply,
      OPENAI,
      'not_found',
      `No response found with id '${request.params.id}'.`,
    );
  });
  app.delete<{ Params: { id: string } }>('/v1/responses/:id', (request, reply) => {
    const { id } = request.params;
    if (state.responses.delete(id)) return { id, object: 'response.deleted', deleted: true };
    return sendError(reply, OPENAI, 'not_found', `No response found with id '${id}'.`);
  });
}

function refuse(reply: Parameters<typeof sendInvalid>[0], counted: InputRefusal) {
  return sendError(reply, OPENAI, counted.kind, counted.message, {
    param: counted.param,
    code: counted.code,
  });
}

/** The function `tool_choice` forces (`required`, or one named), if any. */
function forcedFunction(body: ResponsesBody): string | null {
  const functions = (body.tools ?? []).filter((t) => t.type === 'function' && t.name);
  const choice = body.tool_choice as { type?: unknown; name?: unknown } | string | undefined;
  if (choice === 'required') return functions[0]?.name ?? null;
  if (
    typeof choice === 'object' &&
    choice?.type === 'function' &&
    typeof choice.name === 'string'
  ) {
    return choice.name;
  }
  return null;
}

async function generate(
  call: ModelCall,
  state: MockState,
  body: ResponsesBody,
  shape: ReplyShape,
  plan: Plan,
): Promise<ResponsesOutput> {
  const seed = hash32(
    `${body.model}\n${JSON.stringify(body.input ?? '')}\n${body.previous_response_id ?? ''}`,
    state.behaviour.seed,
  );
  const budget = body.reasoning
    ? reasoningFor(body.reasoning.effort ?? 'medium', plan.reasoningTokens)
    : 0;
  const { tokens, reasoning, finish } = candidateLength(shape, plan, seed, budget);
  const incomplete = finish === 'length';
  const sealed =
    reasoning > 0 && body.include?.includes('reasoning.encrypted_content')
      ? state.seal.seal(reasoning)
      : null;
  const name = forcedFunction(body);
  if (name) {
    const tokenizer = await loadTokenizer('o200k_base');
    const args = toolArguments(seed, tokens, (t) => tokenizer.countText(t));
    return {
      reasoning,
      sealed,
      call: { name, callId: `call_${call.id}` },
      pieces: args.pieces,
      incomplete,
    };
  }
  const pieces = completionPieces(seed, tokens).map((text) => ({ text, tokens: 1 }));
  return { reasoning, sealed, call: null, pieces, incomplete };
}

/**
 * The server label of the first `mcp` tool that requires approval (`require_approval` other than
 * `never`; OpenAI's default is to ask), when the input approves nothing yet: the model asks to
 * call it (an `mcp_approval_request` item) before it answers.
 */
function approvalAsked(body: ResponsesBody): string | undefined {
  const input = typeof body.input === 'string' ? [] : (body.input ?? []);
  if (input.some((item) => item.type === 'mcp_approval_response')) return undefined;
  const tool = (body.tools ?? []).find(
    (t) => t.type === 'mcp' && (t as { require_approval?: unknown }).require_approval !== 'never',
  );
  const label = (tool as { server_label?: unknown } | undefined)?.server_label;
  return tool ? (typeof label === 'string' ? label : 'mcp') : undefined;
}

/**
 * This response's output items by id, as a later call reads them: its reasoning (hidden, the
 * tokens it spent), then its message or function call.
 */
function outputEntries(id: string, out: ResponsesOutput): Map<string, ContextEntry[]> {
  const items = new Map<string, ContextEntry[]>();
  if (out.approval) {
    // What the model reads of its request: the item, as its JSON.
    const content = JSON.stringify(approvalItem(out.approval));
    items.set(out.approval.id, [{ message: { role: 'assistant', content } }]);
  }
  if (out.reasoning > 0) {
    items.set(reasoningItem(id, out).id, [{ reasoning: { hidden: out.reasoning, text: '' } }]);
  }
  const text = out.pieces.map((p) => p.text).join('');
  const message: PromptMessage | null = out.call
    ? {
        role: 'assistant',
        content: null,
        tool_calls: [{ type: 'function', function: { name: out.call.name, arguments: text } }],
      }
    : text
      ? { role: 'assistant', content: text }
      : null;
  items.set(visibleItem(id, out, 'completed').id, message ? [{ message }] : []);
  return items;
}

/** The reasoning item this response's message or function call followed (input.ts). */
function reasoningFollowed(id: string, out: ResponsesOutput): Map<string, string> {
  const follows = new Map<string, string>();
  if (out.reasoning > 0)
    follows.set(visibleItem(id, out, 'completed').id, reasoningItem(id, out).id);
  return follows;
}
