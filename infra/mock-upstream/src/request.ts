import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { planRequest, type Plan } from './plan.js';
import { describeIssue } from './routes/schemas.js';
import type { MockState } from './state.js';
import { OPENAI, sendError, type Surface } from './surface.js';

/**
 * The start of every model route: the body checked against the surface's schema and the
 * `x-mock-*` headers read. Undefined when either is bad; the 400 is sent, in the surface's shape.
 */
export function readRequest<S extends z.ZodType>(
  schema: S,
  request: FastifyRequest,
  reply: FastifyReply,
  state: MockState,
  surface: Surface = OPENAI,
): { body: z.infer<S>; plan: Plan } | undefined {
  const parsed = schema.safeParse(request.body ?? {});
  if (!parsed.success) {
    const { message, param } = describeIssue(parsed.error);
    void sendError(reply, surface, 'invalid', message, { param });
    return undefined;
  }
  const planned = planRequest(request.headers, state);
  if (!planned.ok) {
    void sendError(reply, surface, 'invalid', planned.error.message);
    return undefined;
  }
  return { body: parsed.data, plan: planned.value };
}
