import { countChatPrompt, encodingForModel, loadTokenizer } from '@holdfast/tokenizer';
import { applyTemplate, countTemplateTokens, TEMPLATE_MODEL } from '../template.js';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ModelCall } from '../call.js';
import { completionPieces, hash32, wantedTokens } from '../generate.js';
import {
  chunkFactory,
  sendInvalid,
  sse,
  SYSTEM_FINGERPRINT,
  usage,
  type FinishReason,
} from '../openai.js';
import { planRequest, type Plan } from '../plan.js';
import type { MockState } from '../state.js';
import { ChatBody, describeIssue } from './schemas.js';

interface Choice {
  pieces: string[];
  finish: FinishReason;
}

/** `POST /v1/chat/completions`, JSON or SSE, with exact usage. */
export function registerChat(app: FastifyInstance, state: MockState): void {
  app.post('/v1/chat/completions', async (request, reply) => {
    const parsed = ChatBody.safeParse(request.body);
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendInvalid(reply, message, param);
    }
    const planned = planRequest(request.headers, state);
    if (!planned.ok) return sendInvalid(reply, planned.message);
    const body = parsed.data;
    const { plan } = planned;

    // Self-hosted models are counted as llama-server counts them: the rendered chat template.
    const promptTokens = TEMPLATE_MODEL.test(body.model)
      ? await countTemplateTokens(applyTemplate(body.messages))
      : countChatPrompt(body, await loadTokenizer(encodingForModel(body.model)));
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? null;
    const cap = maxTokens ?? state.behaviour.maxOutputTokens;
    const stream = body.stream === true;
    const includeUsage = stream && body.stream_options?.include_usage === true;
    const call = new ModelCall(
      state,
      reply,
      {
        route: 'chat.completions',
        model: body.model,
        stream,
        includeUsage,
        maxTokens,
        promptTokens,
      },
      plan.failure,
    );
    if (await call.failBeforeResponse()) return reply;

    const seed = hash32(`${body.model}\n${JSON.stringify(body.messages)}`, state.behaviour.seed);
    const choices = Array.from({ length: body.n ?? 1 }, (_, index): Choice => {
      const choiceSeed = hash32(String(index), seed);
      const wanted = wantedTokens(plan.completion, cap, choiceSeed);
      const tokens = Math.min(wanted, cap);
      return {
        pieces: completionPieces(choiceSeed, tokens),
        finish: wanted >= cap ? 'length' : 'stop',
      };
    });
    if (stream) {
      reply.hijack();
      await streamChoices(call, reply, body.model, choices, plan, includeUsage);
      return reply;
    }
    return sendChoices(call, reply, body.model, choices, plan, promptTokens);
  });
}

async function sendChoices(
  call: ModelCall,
  reply: FastifyReply,
  model: string,
  choices: Choice[],
  plan: Plan,
  promptTokens: number,
) {
  const tokens = choices.reduce((n, c) => n + c.pieces.length, 0);
  const longest = Math.max(...choices.map((c) => c.pieces.length));
  if (!(await call.wait(plan.firstTokenLatencyMs + plan.tokenDelayMs * longest))) {
    // The model finished the reply anyway, so a provider bills all of it.
    call.finish('aborted', tokens, null, false);
    reply.hijack();
    return reply;
  }
  call.finish('completed', tokens, choices[0]?.finish ?? 'stop', true);
  return reply.header('x-request-id', call.id).send({
    id: `chatcmpl-${call.id}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    system_fingerprint: SYSTEM_FINGERPRINT,
    choices: choices.map((choice, index) => ({
      index,
      message: {
        role: 'assistant',
        content: choice.pieces.join(''),
        refusal: null,
        annotations: [],
      },
      logprobs: null,
      finish_reason: choice.finish,
    })),
    usage: usage(promptTokens, tokens),
  });
}

/**
 * SSE as OpenAI sends it: a role chunk, one chunk per token, a finish chunk per choice, the
 * usage chunk when asked for, then `[DONE]`. An injected drop or hang cuts in after
 * `afterTokens` content tokens.
 */
async function streamChoices(
  call: ModelCall,
  reply: FastifyReply,
  model: string,
  choices: Choice[],
  plan: Plan,
  includeUsage: boolean,
): Promise<void> {
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-request-id': call.id,
  });
  const chunks = chunkFactory(`chatcmpl-${call.id}`, model, includeUsage);
  const cut =
    call.failure?.kind === 'drop' || call.failure?.kind === 'hang' ? call.failure : undefined;
  // A cut never waits for more tokens than the reply has: it then comes before the finish chunk.
  const total = choices.reduce((n, c) => n + c.pieces.length, 0);
  const cutAt = cut ? Math.min(cut.afterTokens, total) : -1;
  let sent = 0;
  const interrupt = () => (cut?.kind === 'drop' ? call.drop(sent) : call.hang(sent));
  const aborted = () => call.finish('aborted', sent, null, false);

  if (!(await call.write(sse(chunks.role(0)))) || !(await call.wait(plan.firstTokenLatencyMs))) {
    return aborted();
  }
  for (const [index, choice] of choices.entries()) {
    if (index > 0 && !(await call.write(sse(chunks.role(index))))) return aborted();
    for (const piece of choice.pieces) {
      if (sent === cutAt) return interrupt();
      if (sent > 0 && !(await call.wait(plan.tokenDelayMs))) return aborted();
      if (!(await call.write(sse(chunks.content(index, piece))))) return aborted();
      sent += 1;
    }
    if (sent === cutAt) return interrupt();
    if (!(await call.write(sse(chunks.finish(index, choice.finish))))) return aborted();
  }
  const promptTokens = call.promptTokens;
  if (includeUsage && !(await call.write(sse(chunks.usage(usage(promptTokens, sent)))))) {
    return aborted();
  }
  if (!(await call.write(sse('[DONE]')))) return aborted();
  res.end();
  call.finish('completed', sent, choices[0]?.finish ?? 'stop', includeUsage);
}
