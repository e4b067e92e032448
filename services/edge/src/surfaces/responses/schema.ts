import { ResponseId } from '@holdfast/events';
import { z } from 'zod';

/**
 * The OpenAI Responses API request (`responses.create`), strict on the fields Holdfast reads
 * and loose on the rest: items and tools of types it does not know pass through (counted as
 * their JSON), and unknown top-level fields are dropped unless the upstream allows them.
 */

/** A content part: input_text, input_image, input_file, output_text, refusal, ... */
const Part = z.looseObject({
  type: z.string().min(1),
  text: z.string().nullish(),
  refusal: z.string().nullish(),
  image_url: z.string().nullish(),
  file_id: z.string().nullish(),
  file_url: z.string().nullish(),
  detail: z.enum(['auto', 'low', 'high']).nullish(),
});

const Content = z.union([z.string(), z.array(Part).max(10_000)]);
export type ResponsesContent = z.infer<typeof Content>;

/** An input item: a message (the default type), a function call or its output, or any other. */
const Item = z.looseObject({
  type: z.string().min(1).nullish(),
  role: z.string().min(1).nullish(),
  content: Content.nullish(),
  call_id: z.string().nullish(),
  name: z.string().nullish(),
  arguments: z.string().nullish(),
  output: Content.nullish(),
  id: z.string().nullish(),
  summary: z.array(z.looseObject({ text: z.string().nullish() })).nullish(),
  /** Sealed by the provider (a reasoning item's reasoning, a compaction): only it can count it. */
  encrypted_content: z.string().nullish(),
});
export type ResponsesItem = z.infer<typeof Item>;

const Tool = z.looseObject({
  type: z.string().min(1),
  name: z.string().nullish(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
});
export type ResponsesTool = z.infer<typeof Tool>;

export const ResponsesRequest = z.looseObject({
  model: z.string().min(1).max(256),
  input: z.union([z.string(), z.array(Item).max(100_000)]).nullish(),
  instructions: z.string().nullish(),
  tools: z.array(Tool).max(1_024).nullish(),
  tool_choice: z.union([z.string(), z.looseObject({ type: z.string().min(1) })]).nullish(),
  // OpenAI refuses fewer than 16; clamped later, never rejected as large.
  max_output_tokens: z.int().min(16).nullish(),
  max_tool_calls: z.int().min(1).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({}).nullish(),
  /**
   * State kept upstream: the edge counts it with the upstream's input_tokens endpoint. A
   * previous response is admitted only for the tenant that owns it; a conversation is refused
   * (adapter.ts).
   */
  previous_response_id: ResponseId.nullish(),
  conversation: z.union([z.string().min(1), z.looseObject({ id: z.string().min(1) })]).nullish(),
  prompt: z.looseObject({ id: z.string().min(1) }).nullish(),
  reasoning: z
    .looseObject({ effort: z.string().nullish(), summary: z.string().nullish() })
    .nullish(),
  text: z.looseObject({ format: z.looseObject({ type: z.string().min(1) }).nullish() }).nullish(),
  store: z.boolean().nullish(),
  background: z.boolean().nullish(),
  user: z.string().max(512).nullish(),
  safety_identifier: z.string().max(512).nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  truncation: z.enum(['auto', 'disabled']).nullish(),
  include: z.array(z.string()).nullish(),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;
