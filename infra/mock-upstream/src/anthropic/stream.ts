import type { ModelCall } from '../call.js';
import type { Plan } from '../plan.js';
import { TokenStream } from '../stream.js';
import { anthropicUsage, messageObject, outputTokens, type MessagesOutput } from './output.js';

/** Anthropic's in-stream `error` event's `error`, by what the injected break says. */
const ANTHROPIC_STREAM_ERRORS = {
  overloaded: { type: 'overloaded_error', message: 'Overloaded (mock)' },
  rate_limit: { type: 'rate_limit_error', message: 'Rate limit reached (mock)' },
  server: { type: 'api_error', message: 'Internal server error (mock)' },
  failed: { type: 'api_error', message: 'Internal server error (mock)' },
} as const;

/**
 * A Messages stream as Anthropic sends it: message_start (usage with the input and cache
 * counts, output_tokens 1), per content block content_block_start, its deltas (thinking_delta
 * then signature_delta, text_delta, or input_json_delta) and content_block_stop, a ping after
 * the first block starts (each server tool use a server_tool_use block and its result block,
 * after the thinking), message_delta with stop_reason and the cumulative usage (the server
 * tools' counts, `server_tool_use`, only there), then message_stop. An injected `error` break is an `error` event
 * (overloaded_error, or what `x-mock-stream-error` says).
 */
export async function streamMessage(
  call: ModelCall,
  plan: Plan,
  model: string,
  out: MessagesOutput,
): Promise<void> {
  call.openStream({ 'request-id': call.id });
  const ev = (type: string, data: object) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const thinking = out.thinking !== null;
  const { output, reasoning } = outputTokens(out);
  const pump = new TokenStream(call, plan, output, (kind) =>
    ev('error', { error: ANTHROPIC_STREAM_ERRORS[kind ?? 'overloaded'] }),
  );
  // As Anthropic does: the input counts up front, output_tokens 1 until message_delta; the
  // server tools' uses are counted in message_delta's usage only.
  const { server_tool_use: _uses, ...input } = anthropicUsage(call.usage(0, 0), false);
  const start = { ...input, output_tokens: 1 };
  const message = messageObject(call.id, model, [], null, start);
  if (!(await pump.event(ev('message_start', { message })))) return;
  if (!(await pump.begin())) return;

  let index = 0;
  let pinged = false;
  const block = async (
    content_block: object,
    deltas: { delta: object; tokens: number; reasoning?: boolean }[],
    tail: object[] = [],
  ) => {
    if (!(await pump.event(ev('content_block_start', { index, content_block })))) return false;
    if (!pinged) {
      pinged = true;
      if (!(await pump.event(ev('ping', {})))) return false;
    }
    for (const { delta, tokens, reasoning: r } of deltas) {
      if (!(await pump.token(ev('content_block_delta', { index, delta }), tokens, r))) return false;
    }
    if (!(await pump.checkpoint())) return false;
    for (const delta of tail)
      if (!(await pump.event(ev('content_block_delta', { index, delta })))) return false;
    if (!(await pump.event(ev('content_block_stop', { index })))) return false;
    index += 1;
    return true;
  };
  if (out.thinking) {
    const deltas = out.thinking.pieces.map((t) => ({
      delta: { type: 'thinking_delta', thinking: t },
      tokens: 1,
      reasoning: true,
    }));
    const signature = [{ type: 'signature_delta', signature: out.thinking.signature }];
    if (!(await block({ type: 'thinking', thinking: '', signature: '' }, deltas, signature)))
      return;
  }
  // The server tools' uses as they happen: the model's server_tool_use block (its input
  // streamed, output billed with its name), the search (as long as a first token takes), then its result block.
  for (const use of out.serverTools) {
    if (!(await block(use.call, [{ delta: use.input, tokens: use.tokens }]))) return;
    if (!(await pump.pause(plan.firstTokenLatencyMs))) return;
    if (!(await block(use.result, []))) return;
  }
  if (out.tool) {
    const { id, name } = out.tool;
    const deltas = out.tool.pieces.map((p) => ({
      delta: { type: 'input_json_delta', partial_json: p.text },
      tokens: p.tokens,
    }));
    if (!(await block({ type: 'tool_use', id, name, input: {} }, deltas))) return;
  } else if (out.text.length > 0 || !out.thinking) {
    const deltas = out.text.map((t) => ({ delta: { type: 'text_delta', text: t }, tokens: 1 }));
    if (!(await block({ type: 'text', text: '' }, deltas))) return;
  }
  const usage = anthropicUsage(call.usage(output, reasoning), thinking);
  const stop = { stop_reason: out.stopReason, stop_sequence: out.stopSequence };
  if (!(await pump.event(ev('message_delta', { delta: stop, usage })))) return;
  if (!(await pump.event(ev('message_stop', {})))) return;
  pump.complete(out.stopReason, true);
}
