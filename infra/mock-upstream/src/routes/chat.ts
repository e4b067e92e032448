import type { FastifyInstance } from 'fastify';
import { startCall, type ModelCall } from '../call.js';
import { completionPieces, hash32, reasoningFor } from '../generate.js';
import {
  chunkFactory,
  OPENAI_STREAM_ERRORS,
  sendInvalid,
  sse,
  SYSTEM_FINGERPRINT,
  usage,
} from '../openai.js';
import type { Plan } from '../plan.js';
import { countPrompt } from '../prompt.js';
import { chatToolInput, chatToolUses } from '../server-tools.js';
import { readRequest } from '../request.js';
import type { MockState } from '../state.js';
import { TokenStream } from '../stream.js';
import { OPENAI } from '../surface.js';
import { servedTier } from '../tiers.js';
import { uncachedPrompt } from '../usage.js';
import { candidateLength, replyShape } from '../vendor.js';
import { ChatBody } from './schemas.js';

interface Candidate {
  pieces: string[];
  reasoning: number;
  finish: 'stop' | 'length';
}

/**
 * `POST /v1/chat/completions`, JSON or SSE, with exact usage. Vendor length and count fields
 * are obeyed (vendor.ts); `reasoning_effort` spends reasoning tokens inside the cap.
 */
export function registerChat(app: FastifyInstance, state: MockState): void {
  app.post('/v1/chat/completions', async (request, reply) => {
    const read = readRequest(ChatBody, request, reply, state);
    if (!read) return reply;
    const { body, plan } = read;
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? null;
    const shaped = replyShape({
      body,
      surfaceMax: maxTokens,
      surfaceField: body.max_completion_tokens == null ? 'max_tokens' : 'max_completion_tokens',
      n: body.n ?? 1,
      counts: true,
      serverMax: state.behaviour.maxOutputTokens,
    });
    if (!shaped.ok) return sendInvalid(reply, shaped.error.message, shaped.error.param);
    const shape = shaped.value;

    // A search model's search results are input too (billed, not always: chatToolInput).
    const promptTokens =
      (await countPrompt(body, state.behaviour.openWeight)) +
      chatToolInput(body.model, plan.toolInputTokens);
    const stream = body.stream === true;
    const call = startCall(
      state,
      reply,
      OPENAI,
      {
        route: 'chat.completions',
        model: body.model,
        stream,
        includeUsage: stream && body.stream_options?.include_usage === true,
        maxTokens,
        outputCap: shape.cap,
        vendorFields: shape.vendorFields,
        choices: shape.choices,
        candidates: shape.candidates,
        endUser: body.user ?? null,
        prompt: {
          ...uncachedPrompt(promptTokens),
          cached: Math.min(plan.cachedTokens, promptTokens),
        },
        audio: audioOf(body, plan, promptTokens, state),
        serviceTier: servedTier(body.service_tier, 'openai', plan, state),
        longContextAbove: plan.longContextAbove,
        toolUses: chatToolUses(body.model),
      },
      plan,
    );
    if (!call || (await call.failBeforeResponse())) return reply;

    const seed = hash32(`${body.model}\n${JSON.stringify(body.messages)}`, state.behaviour.seed);
    const budget = reasoningFor(body.reasoning_effort, plan.reasoningTokens);
    const candidates = Array.from({ length: shape.candidates }, (_, index): Candidate => {
      const choiceSeed = hash32(String(index), seed);
      const { tokens, reasoning, finish } = candidateLength(shape, plan, choiceSeed, budget);
      return { pieces: completionPieces(choiceSeed, tokens), reasoning, finish };
    });
    // An audio reply gets an id, as OpenAI's: a later call brings it back by it (`audio: {id}`).
    const audio = call.info.audio?.completion ? `audio_${call.id.replace(/\W/g, '')}` : null;
    if (stream) {
      await streamChoices(call, body.model, candidates, shape.choices, plan, audio);
      return reply;
    }
    return sendChoices(call, body.model, candidates, shape.choices, plan, audio);
  });
}

/**
 * The call's audio: its `input_audio` parts take `audioPromptTokensPerPart` each (or the
 * header's count), within the prompt and after its cached part; with `modalities: ["audio"]`
 * or `audio` output parameters, the output is audio up to `audioCompletionTokens` (all of it
 * but reasoning when null).
 */
function audioOf(body: ChatBody, plan: Plan, promptTokens: number, state: MockState) {
  const parts = body.messages.reduce(
    (n, m) =>
      n +
      (Array.isArray(m.content)
        ? (m.content as { type?: unknown }[]).filter((p) => p.type === 'input_audio').length
        : 0),
    0,
  );
  const room = promptTokens - Math.min(plan.cachedTokens, promptTokens);
  const asked =
    parts > 0 ? (plan.audioPromptTokens ?? parts * state.behaviour.audioPromptTokensPerPart) : 0;
  const output =
    (Array.isArray(body.modalities) && body.modalities.includes('audio')) || body.audio != null;
  return {
    prompt: Math.min(asked, room),
    completion: output ? (plan.audioCompletionTokens ?? Number.MAX_SAFE_INTEGER) : 0,
  };
}

/** All output of the candidates (the returned ones and the hidden `best_of` ones). */
function totals(candidates: readonly Candidate[]): { output: number; reasoning: number } {
  const reasoning = candidates.reduce((n, c) => n + c.reasoning, 0);
  return { output: reasoning + candidates.reduce((n, c) => n + c.pieces.length, 0), reasoning };
}

/** An audio reply's id and expiry (one hour, as OpenAI's), for choice `index`. */
function replyAudio(id: string, index: number) {
  return { id: `${id}_${index}`, expires_at: Math.floor(Date.now() / 1000) + 3600 };
}

async function sendChoices(
  call: ModelCall,
  model: string,
  candidates: Candidate[],
  returned: number,
  plan: Plan,
  audio: string | null,
) {
  const { output, reasoning } = totals(candidates);
  const longest = Math.max(...candidates.map((c) => c.pieces.length + c.reasoning));
  const reply = call.reply;
  if (!(await call.wait(plan.firstTokenLatencyMs + plan.tokenDelayMs * longest))) {
    // The model finished the reply anyway, so a provider bills all of it.
    call.finish('aborted', output, null, false, reasoning);
    reply.hijack();
    return reply;
  }
  const choices = candidates.slice(0, returned);
  call.finish('completed', output, choices[0]?.finish ?? 'stop', true, reasoning);
  return reply.headers({ ...call.headers, 'x-request-id': call.id }).send({
    id: `chatcmpl-${call.id}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    service_tier: call.info.serviceTier,
    system_fingerprint: SYSTEM_FINGERPRINT,
    choices: choices.map((choice, index) => ({
      index,
      message: {
        role: 'assistant',
        content: choice.pieces.join(''),
        refusal: null,
        annotations: [],
        ...(audio ? { audio: { ...replyAudio(audio, index), data: '', transcript: '' } } : {}),
      },
      logprobs: null,
      finish_reason: choice.finish,
    })),
    usage: usage(call.usage(output, reasoning)),
  });
}

/**
 * SSE as OpenAI sends it: a role chunk, one chunk per token, a finish chunk per choice, the
 * usage chunk when asked for, then `[DONE]`. An injected break cuts in after `afterTokens`
 * content tokens.
 */
async function streamChoices(
  call: ModelCall,
  model: string,
  candidates: Candidate[],
  returned: number,
  plan: Plan,
  audio: string | null,
): Promise<void> {
  call.openStream({ 'x-request-id': call.id });
  const choices = candidates.slice(0, returned);
  const chunks = chunkFactory(
    `chatcmpl-${call.id}`,
    model,
    call.info.includeUsage,
    call.info.serviceTier,
  );
  const visible = choices.reduce((n, c) => n + c.pieces.length, 0);
  const { output, reasoning } = totals(candidates);
  const out = new TokenStream(
    call,
    plan,
    visible,
    (kind) => sse({ error: { ...OPENAI_STREAM_ERRORS[kind ?? 'server'], param: null } }),
    { reasoning, hidden: output - reasoning - visible },
  );
  if (!(await out.event(sse(chunks.role(0)))) || !(await out.begin())) return;
  for (const [index, choice] of choices.entries()) {
    if (index > 0 && !(await out.event(sse(chunks.role(index))))) return;
    for (const piece of choice.pieces) {
      if (!(await out.token(sse(chunks.content(index, piece))))) return;
    }
    if (!(await out.checkpoint())) return;
    if (audio && !(await out.event(sse(chunks.audio(index, replyAudio(audio, index)))))) return;
    if (!(await out.event(sse(chunks.finish(index, choice.finish))))) return;
  }
  const { includeUsage } = call.info;
  if (includeUsage && !(await out.event(sse(chunks.usage(usage(call.usage(output, reasoning))))))) {
    return;
  }
  if (!(await out.event(sse('[DONE]')))) return;
  out.complete(choices[0]?.finish ?? 'stop', includeUsage);
}
