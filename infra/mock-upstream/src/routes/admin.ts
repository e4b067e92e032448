import type { FastifyInstance } from 'fastify';
import { BehaviourPatch, FailNext } from '../behaviour.js';
import { sendInvalid } from '../openai.js';
import type { MockState } from '../state.js';
import { describeIssue } from './schemas.js';

/**
 * Test controls under `/_mock`: statistics, reset, behaviour, and queued failures (for clients
 * such as the edge that cannot pass per-request headers through).
 */
export function registerAdmin(app: FastifyInstance, state: MockState): void {
  app.get('/_mock/stats', () => state.snapshot());
  // The call log page by page: `?after=<seq>` gives the calls recorded since that one.
  app.get<{ Querystring: { after?: string } }>('/_mock/log', (request, reply) => {
    const after = Number(request.query.after ?? 0);
    if (!Number.isInteger(after) || after < 0) {
      return sendInvalid(reply, 'after: a non-negative integer (a record seq)');
    }
    return { records: state.log(after) };
  });
  app.get('/_mock/capacity', () => state.capacity.snapshot());
  app.post('/_mock/reset', (_request, reply) => {
    state.reset();
    return reply.code(204).send();
  });
  app.get('/_mock/config', () => state.behaviour);
  app.put('/_mock/config', (request, reply) => {
    const patch = BehaviourPatch.safeParse(request.body ?? {});
    if (!patch.success) return sendInvalid(reply, describeIssue(patch.error).message);
    return state.configure(patch.data);
  });
  app.post('/_mock/fail-next', (request, reply) => {
    const spec = FailNext.safeParse(request.body ?? {});
    if (!spec.success) return sendInvalid(reply, describeIssue(spec.error).message);
    return { queued: state.failNext(spec.data) };
  });
}
