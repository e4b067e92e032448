import { z } from 'zod';

/**
 * The Anthropic Messages request (`messages.create`), strict on the fields Holdfast reads and
 * loose on the rest: content blocks and tools of types it does not know pass through (counted
 * as their JSON).
 */

const CacheControl = z.looseObject({
  type: z.literal('ephemeral'),
  ttl: z.enum(['5m', '1h']).nullish(),
});

const BlockFields = z.looseObject({
  type: z.string().min(1),
  text: z.string().nullish(),
  cache_control: CacheControl.nullish(),
});

const ToolResultBlocks = z.array(BlockFields).max(10_000);

/**
 * A `tool_result`'s content, read as the blocks of the result, is a string or a list of blocks
 * (other types' `content` is theirs: a search result's list, a server tool's result object).
 * The issues of a block's content (none for other types): the refinement of `Block`, and the
 * rule the edge's fast check (schemas/fast-bodies.ts) holds every block to.
 */
export function toolResultIssues(block: z.output<typeof BlockFields>): z.core.$ZodIssue[] {
  if (block.type !== 'tool_result') return [];
  const content = block.content;
  if (content === undefined || content === null || typeof content === 'string') return [];
  return ToolResultBlocks.safeParse(content).error?.issues ?? [];
}

/** A content block. */
const Block = BlockFields.superRefine((block, ctx) => {
  for (const issue of toolResultIssues(block)) {
    ctx.addIssue({ code: 'custom', path: ['content', ...issue.path], message: issue.message });
  }
});
export type MessagesBlock = z.infer<typeof Block>;

const Message = z.looseObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(Block).min(1).max(10_000)]),
});

const Tool = z.looseObject({
  name: z.string().min(1).max(256),
  type: z.string().min(1).nullish(),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()).nullish(),
  cache_control: CacheControl.nullish(),
});
export type MessagesTool = z.infer<typeof Tool>;

const fields = {
  model: z.string().min(1).max(256),
  messages: z.array(Message).min(1).max(100_000),
  system: z.union([z.string(), z.array(Block).max(10_000)]).nullish(),
  tools: z.array(Tool).max(1_024).nullish(),
  tool_choice: z
    .looseObject({
      type: z.enum(['auto', 'any', 'tool', 'none']),
      name: z.string().min(1).nullish(),
    })
    .nullish(),
  thinking: z
    .looseObject({
      type: z.string().min(1),
      budget_tokens: z.int().min(1).nullish(),
    })
    .nullish(),
  metadata: z.looseObject({ user_id: z.string().max(256).nullish() }).nullish(),
  stop_sequences: z.array(z.string()).max(8_192).nullish(),
  stream: z.boolean().nullish(),
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.int().min(0).nullish(),
  service_tier: z.string().nullish(),
  /** A code execution container: its id, or an object with its id and the skills it loads. */
  container: z
    .union([
      z.string().min(1).max(256),
      z.looseObject({
        id: z.string().min(1).max(256).nullish(),
        skills: z
          .array(z.looseObject({ type: z.string().min(1), skill_id: z.string().min(1).max(256) }))
          .max(8)
          .nullish(),
      }),
    ])
    .nullish(),
};

/** `POST /v1/messages`: `max_tokens` is required, as Anthropic requires it (then clamped). */
export const MessagesRequest = z.looseObject({ ...fields, max_tokens: z.int().min(1) });
export type MessagesRequest = z.infer<typeof MessagesRequest>;

/** `POST /v1/messages/count_tokens`: the same request without `max_tokens`. */
export const CountTokensRequest = z.looseObject(fields);
export type CountTokensRequest = z.infer<typeof CountTokensRequest>;
