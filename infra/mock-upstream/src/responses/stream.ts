import type { ModelCall } from '../call.js';
import type { Plan } from '../plan.js';
import { TokenStream } from '../stream.js';
import {
  approvalItem,
  outputText,
  reasoningItem,
  responseObject,
  responsesUsage,
  visibleItem,
  visibleTokens,
  type ResponsesOutput,
} from './objects.js';
import type { ResponsesBody } from './schema.js';
import { toolCallItems } from '../server-tools.js';
import { OPENAI_STREAM_ERRORS } from '../openai.js';

/**
 * A Responses stream as OpenAI sends it: typed events (`event: <type>` with the same `type` in
 * the data) numbered by `sequence_number`: response.created, response.in_progress, the output
 * items (a reasoning item; then the message's content part and its output_text deltas, or the
 * function call's argument deltas), and response.completed, or response.incomplete when
 * max_output_tokens ended it. No `[DONE]`. An injected `error` break is an `error` event
 * (`response.failed` with `x-mock-stream-error: failed`).
 */
export async function streamResponse(
  call: ModelCall,
  plan: Plan,
  body: ResponsesBody,
  out: ResponsesOutput,
  createdAt: number,
  finalize: () => ReturnType<typeof responseObject>,
): Promise<void> {
  call.openStream({ 'x-request-id': call.id });
  let sequence = 0;
  const ev = (type: string, data: object) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`;
  const started = responseObject(call.id, body, createdAt, call.info.serviceTier, {
    status: 'in_progress',
  });
  const pump = new TokenStream(
    call,
    plan,
    visibleTokens(out),
    (kind, written) => {
      const { code, message } = OPENAI_STREAM_ERRORS[kind ?? 'server'];
      if (kind !== 'failed') return ev('error', { code, message, param: null });
      // A response that failed: its error, and the usage of what was written until then.
      const usage = responsesUsage(call.usage(written.output, written.reasoning));
      const response = { ...started, status: 'failed', error: { code, message }, usage };
      return ev('response.failed', { response });
    },
    { reasoning: out.reasoning, hidden: 0 },
  );
  if (!(await pump.event(ev('response.created', { response: started })))) return;
  if (!(await pump.event(ev('response.in_progress', { response: started })))) return;
  if (!(await pump.begin())) return;

  let output_index = 0;
  // The provider-run tools' calls come first: the model searched before it answered. Each
  // runs (as long as a first token takes) between its item's added and done events.
  for (const item of toolCallItems(call.id, call.info.toolUses ?? {})) {
    // Added without its image (an image_generation_call's result comes with done).
    const { result: _image, ...added } = {
      ...(item as { id: string; type: string; result?: unknown }),
      status: 'in_progress',
    };
    if (!(await pump.event(ev('response.output_item.added', { output_index, item: added }))))
      return;
    // An image streams its progress events (no partial images: partial_images is 0).
    const progress = (step: string) =>
      pump.event(ev(`response.image_generation_call.${step}`, { output_index, item_id: added.id }));
    const image = added.type === 'image_generation_call';
    if (image && !((await progress('in_progress')) && (await progress('generating')))) return;
    if (!(await pump.pause(plan.firstTokenLatencyMs))) return;
    if (image && !(await progress('completed'))) return;
    if (!(await pump.event(ev('response.output_item.done', { output_index, item })))) return;
    output_index += 1;
  }
  if (out.approval) {
    const item = approvalItem(out.approval);
    if (!(await pump.event(ev('response.output_item.added', { output_index, item })))) return;
    if (!(await pump.event(ev('response.output_item.done', { output_index, item })))) return;
    output_index += 1;
  }
  if (out.reasoning > 0) {
    const item = reasoningItem(call.id, out);
    if (!(await pump.event(ev('response.output_item.added', { output_index, item })))) return;
    if (!(await pump.event(ev('response.output_item.done', { output_index, item })))) return;
    output_index += 1;
  }
  // A cap spent on reasoning leaves no visible item.
  if (out.pieces.length > 0 || !out.incomplete) {
    const item = visibleItem(call.id, out, 'in_progress', '');
    const item_id = item.id;
    const part = { item_id, output_index, content_index: 0 };
    if (!(await pump.event(ev('response.output_item.added', { output_index, item })))) return;
    if (
      !out.call &&
      !(await pump.event(ev('response.content_part.added', { ...part, part: outputText('') })))
    ) {
      return;
    }
    let sofar = '';
    for (const piece of out.pieces) {
      const delta = out.call
        ? ev('response.function_call_arguments.delta', { item_id, output_index, delta: piece.text })
        : ev('response.output_text.delta', { ...part, delta: piece.text, logprobs: [] });
      if (!(await pump.token(delta, piece.tokens))) return;
      sofar += piece.text;
    }
    if (!(await pump.checkpoint())) return;
    const closing = out.call
      ? [ev('response.function_call_arguments.done', { item_id, output_index, arguments: sofar })]
      : [
          ev('response.output_text.done', { ...part, text: sofar, logprobs: [] }),
          ev('response.content_part.done', { ...part, part: outputText(sofar) }),
        ];
    const done = visibleItem(call.id, out, out.incomplete ? 'incomplete' : 'completed');
    closing.push(ev('response.output_item.done', { output_index, item: done }));
    for (const event of closing) if (!(await pump.event(event))) return;
  }
  const final = finalize();
  const type = out.incomplete ? 'response.incomplete' : 'response.completed';
  if (!(await pump.event(ev(type, { response: final })))) return;
  pump.complete(final.status, true);
}
