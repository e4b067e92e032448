import { z } from 'zod';

/** The OpenAI Embeddings request: strict on known fields, unknown fields pass through. */
export const EmbeddingsRequest = z.looseObject({
  model: z.string().min(1).max(256),
  input: z.union([
    z.string(),
    z.array(z.string()).min(1).max(2_048),
    z.array(z.int().min(0)).min(1),
    z
      .array(z.array(z.int().min(0)).min(1))
      .min(1)
      .max(2_048),
  ]),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: z.int().min(1).max(65_536).nullish(),
  user: z.string().max(512).nullish(),
});
export type EmbeddingsRequest = z.infer<typeof EmbeddingsRequest>;
