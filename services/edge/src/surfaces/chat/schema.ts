import { z } from 'zod';

/**
 * The OpenAI Chat Completions request, strict on the fields Holdfast knows (types and ranges as
 * OpenAI documents them) and loose on the rest: unknown fields pass through to the upstream.
 * The inferred type fits @holdfast/tokenizer's ChatPromptRequest.
 */

const Text = z.string();
const Int = z.int();

const TextPart = z.looseObject({ type: z.literal('text'), text: Text });
const ImagePart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({
    url: z.string().min(1),
    detail: z.enum(['auto', 'low', 'high']).nullish(),
  }),
});
const AudioPart = z.looseObject({
  type: z.literal('input_audio'),
  input_audio: z.looseObject({ data: z.string(), format: z.string().min(1) }),
});
const FilePart = z.looseObject({ type: z.literal('file'), file: z.looseObject({}) });
const RefusalPart = z.looseObject({ type: z.literal('refusal'), refusal: Text });

const UserPart = z.discriminatedUnion('type', [TextPart, ImagePart, AudioPart, FilePart]);
const AssistantPart = z.discriminatedUnion('type', [TextPart, RefusalPart]);

const Name = z.string().min(1).max(256).nullish();

const ToolCall = z.looseObject({
  id: z.string(),
  type: z.string().min(1),
  function: z.looseObject({ name: z.string(), arguments: z.string() }).optional(),
});
const FunctionCall = z.looseObject({ name: z.string(), arguments: z.string() });

const Message = z.discriminatedUnion('role', [
  z.looseObject({
    role: z.literal('system'),
    content: z.union([Text, z.array(TextPart)]),
    name: Name,
  }),
  z.looseObject({
    role: z.literal('developer'),
    content: z.union([Text, z.array(TextPart)]),
    name: Name,
  }),
  z.looseObject({
    role: z.literal('user'),
    content: z.union([Text, z.array(UserPart)]),
    name: Name,
  }),
  z.looseObject({
    role: z.literal('assistant'),
    content: z.union([Text, z.array(AssistantPart)]).nullish(),
    name: Name,
    refusal: Text.nullish(),
    tool_calls: z.array(ToolCall).nullish(),
    function_call: FunctionCall.nullish(),
  }),
  z.looseObject({
    role: z.literal('tool'),
    content: z.union([Text, z.array(TextPart)]),
    tool_call_id: z.string(),
  }),
  z.looseObject({
    role: z.literal('function'),
    content: Text.nullable(),
    name: z.string().min(1),
  }),
]);

const FunctionDefinition = z.looseObject({
  name: z.string().min(1).max(256),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

const Tool = z.union([
  z.looseObject({ type: z.literal('function'), function: FunctionDefinition }),
  z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name: z.string().min(1) }) }),
]);

/** max_tokens / max_completion_tokens: a positive integer (clamped later, never rejected as large). */
const MaxTokens = Int.min(1).nullish();

export const ChatRequest = z.looseObject({
  model: z.string().min(1).max(256),
  messages: z.array(Message).min(1).max(100_000),
  max_tokens: MaxTokens,
  max_completion_tokens: MaxTokens,
  n: Int.min(1).max(128).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: Int.min(0).max(20).nullish(),
  stop: z.union([Text, z.array(Text).max(4)]).nullish(),
  seed: Int.nullish(),
  user: z.string().max(512).nullish(),
  safety_identifier: z.string().max(512).nullish(),
  tools: z.array(Tool).max(1_024).nullish(),
  tool_choice: z
    .union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.string().min(1) })])
    .nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  functions: z.array(FunctionDefinition).max(1_024).nullish(),
  function_call: z
    .union([z.enum(['none', 'auto']), z.looseObject({ name: z.string().min(1) })])
    .nullish(),
  response_format: z
    .looseObject({ type: z.enum(['text', 'json_object', 'json_schema']) })
    .nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  store: z.boolean().nullish(),
  service_tier: z.string().nullish(),
  reasoning_effort: z.string().nullish(),
  modalities: z.array(z.string()).nullish(),
});
export type ChatRequest = z.infer<typeof ChatRequest>;
