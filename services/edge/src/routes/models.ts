import type { FastifyInstance } from 'fastify';
import { printable } from '../request/auth.js';
import { EdgeError } from '../errors.js';
import { sendError } from '../plugins/errors.js';

function entry(id: string) {
  return { id, object: 'model', created: 0, owned_by: 'holdfast' };
}

/** `GET /v1/models` and `GET /v1/models/:id`: the models of the applied configuration. */
export function registerModels(app: FastifyInstance): void {
  app.get('/v1/models', () => {
    const models = [...(app.configSnapshot.current?.models.keys() ?? [])];
    return { object: 'list', data: models.map(entry) };
  });
  app.get<{ Params: { '*': string } }>('/v1/models/*', (request, reply) => {
    const id = request.params['*'];
    if (app.configSnapshot.current?.models.has(id)) return entry(id);
    return sendError(
      request,
      reply,
      new EdgeError({
        code: 'not_found',
        message: `The model "${printable(id)}" does not exist.`,
        param: 'model',
      }),
    );
  });
}
