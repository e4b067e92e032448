import { z } from 'zod';

/**
 * The Responses API request fields the mock reads (OpenAI's `responses.create`). Objects are
 * loose: unknown fields pass, and vendor length fields are obeyed as on chat (vendor.ts).
 */
const Part = z.looseObject({
  type: z.string().min(1),
  text: z.string().optional(),
  refusal: z.string().optional(),
  image_url: z.string().nullish(),
  detail: z.string().nullish(),
});
const Content = z.union([z.string(), z.array(Part)]);
export type ResponsesContent = z.infer<typeof Content>;

/**
 * A message, a function call or its output, a reasoning item (its summary, its reasoning text,
 * its sealed reasoning), or any other item (counted as its JSON).
 */
const Item = z.looseObject({
  type: z.string().optional(),
  id: z.string().optional(),
  role: z.string().optional(),
  content: Content.optional(),
  call_id: z.string().optional(),
  name: z.string().optional(),
  arguments: z.string().optional(),
  output: Content.optional(),
  summary: z.array(z.looseObject({ text: z.string().optional() })).optional(),
  encrypted_content: z.string().nullish(),
});
export type ResponsesItem = z.infer<typeof Item>;

const Tool = z.looseObject({
  type: z.string().min(1),
  name: z.string().optional(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
});
export type ResponsesTool = z.infer<typeof Tool>;

const fields = {
  input: z.union([z.string(), z.array(Item)]).optional(),
  instructions: z.string().nullish(),
  tools: z.array(Tool).nullish(),
  tool_choice: z.unknown().optional(),
  // OpenAI refuses fewer than 16 output tokens.
  max_output_tokens: z.int().min(16).max(100_000_000).nullish(),
  reasoning: z
    .looseObject({ effort: z.string().nullish(), summary: z.string().nullish() })
    .nullish(),
  previous_response_id: z.string().min(1).nullish(),
  conversation: z.unknown().optional(),
  store: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  text: z.looseObject({ format: z.looseObject({ type: z.string() }).nullish() }).nullish(),
  /** `reasoning.encrypted_content`: reasoning items carry the reasoning, sealed (sealed.ts). */
  include: z.array(z.string()).nullish(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
};

export const ResponsesBody = z.looseObject({ model: z.string().min(1), ...fields });
export type ResponsesBody = z.infer<typeof ResponsesBody>;

/** `POST /v1/responses/input_tokens` takes the same body; `model` may be left out. */
export const InputTokensBody = z.looseObject({ model: z.string().min(1).nullish(), ...fields });
export type InputTokensBody = z.infer<typeof InputTokensBody>;
