import { z } from 'zod';

/** zod's JSON Schema of what `schema` accepts (its input), for ajv (draft-07, no `$schema`). */
export function inputJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, {
    io: 'input',
    unrepresentable: 'throw',
    target: 'draft-07',
  }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}
