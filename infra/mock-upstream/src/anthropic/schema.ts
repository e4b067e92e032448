import { z } from 'zod';

/**
 * The Messages API request fields the mock reads (`@anthropic-ai/sdk` `messages.create`).
 * Objects are loose, as the mock reads only what it counts or obeys.
 */
const CacheControl = z.looseObject({
  type: z.literal('ephemeral'),
  ttl: z.enum(['5m', '1h']).optional(),
});
export type CacheControl = z.infer<typeof CacheControl>;

const Block = z.looseObject({ type: z.string().min(1), cache_control: CacheControl.nullish() });
export type ContentBlock = z.infer<typeof Block>;

const Message = z.looseObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(Block).min(1)]),
});

const Tool = z.looseObject({
  name: z.string().min(1),
  /** A built-in or server tool's type (`bash_20250124`); none or `custom` for the client's own. */
  type: z.string().min(1).optional(),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  cache_control: CacheControl.nullish(),
});

// Anthropic's words for a missing field.
const required = {
  error: (issue: { input: unknown }) => (issue.input === undefined ? 'Field required' : undefined),
};

const fields = {
  model: z.string(required).min(1),
  messages: z.array(Message, required).min(1),
  system: z.union([z.string(), z.array(Block)]).optional(),
  tools: z.array(Tool).optional(),
  tool_choice: z
    .looseObject({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional() })
    .optional(),
  metadata: z.looseObject({ user_id: z.string().max(256).nullish() }).optional(),
  stop_sequences: z.array(z.string().min(1)).optional(),
  stream: z.boolean().optional(),
  thinking: z
    .looseObject({
      type: z.enum(['enabled', 'disabled', 'adaptive']),
      budget_tokens: z.int().min(1024).optional(),
    })
    .optional(),
};

export const MessagesBody = z.looseObject({
  ...fields,
  max_tokens: z.int(required).min(1),
});
export type MessagesBody = z.infer<typeof MessagesBody>;

/** `POST /v1/messages/count_tokens`: the same request without `max_tokens`. */
export const CountTokensBody = z.looseObject(fields);
export type CountTokensBody = z.infer<typeof CountTokensBody>;
