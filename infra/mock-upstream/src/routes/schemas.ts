import { z } from 'zod';

/**
 * The request fields the mock reads. Objects are loose: unknown fields pass, as at OpenAI.
 * The inferred types fit @holdfast/tokenizer's request shapes.
 */
const Text = z.string();
const FunctionDefinition = z.looseObject({
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
});
const ContentPart = z.looseObject({
  type: z.string().min(1),
  text: Text.optional(),
  refusal: Text.optional(),
  image_url: z.looseObject({ url: z.string(), detail: z.string().nullish() }).optional(),
});
const Message = z.looseObject({
  role: z.string().min(1),
  content: z.union([Text, z.array(ContentPart)]).nullish(),
  name: z.string().nullish(),
  refusal: z.string().nullish(),
  tool_calls: z
    .array(
      z.looseObject({
        type: z.string().optional(),
        function: z
          .looseObject({ name: z.string().optional(), arguments: Text.optional() })
          .optional(),
      }),
    )
    .nullish(),
  function_call: z
    .looseObject({ name: z.string().optional(), arguments: Text.optional() })
    .nullish(),
});
const MaxTokens = z.int().min(1).max(100_000_000).nullish();

export const ChatBody = z.looseObject({
  model: z.string().min(1),
  messages: z.array(Message).min(1),
  tools: z
    .array(z.looseObject({ type: z.string(), function: FunctionDefinition.optional() }))
    .nullish(),
  functions: z.array(FunctionDefinition).nullish(),
  tool_choice: z.unknown().optional(),
  function_call: z.unknown().optional(),
  response_format: z.unknown().optional(),
  max_tokens: MaxTokens,
  max_completion_tokens: MaxTokens,
  n: z.int().min(1).max(128).nullish(),
  user: z.string().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
});
export type ChatBody = z.infer<typeof ChatBody>;

export const EmbeddingsBody = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string(),
    z.array(z.string()).min(1),
    z.array(z.int().min(0)).min(1),
    z.array(z.array(z.int().min(0)).min(1)).min(1),
  ]),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: z.int().min(1).max(8_192).nullish(),
});
export type EmbeddingsBody = z.infer<typeof EmbeddingsBody>;

/** The first issue as an OpenAI-style message and `param`. */
export function describeIssue(error: z.ZodError): { message: string; param: string | null } {
  const issue = error.issues[0];
  const param = issue && issue.path.length > 0 ? issue.path.join('.') : null;
  return { message: `${param ?? 'body'}: ${issue?.message ?? 'invalid request'}`, param };
}
