import type { FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';
import { EdgeError } from '../errors.js';

/** The first issue as an OpenAI-style message and `param` (`messages.0.content`). */
function describeIssue(error: z.ZodError): { message: string; param: string | null } {
  const issue = error.issues[0];
  const param = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : null;
  const where = param ?? 'body';
  return { message: `Invalid request: ${where}: ${issue?.message ?? 'invalid'}`, param };
}

/**
 * Route schemas are zod schemas (the one source of the request types); fastify runs them before
 * the handler, and a failure becomes a 400 invalid_request naming the field.
 */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> = ({ schema }) => {
  return (data: unknown) => {
    const parsed = schema.safeParse(data);
    if (parsed.success) return { value: parsed.data };
    const { message, param } = describeIssue(parsed.error);
    return { error: new EdgeError({ code: 'invalid_request', message, param }) };
  };
};
