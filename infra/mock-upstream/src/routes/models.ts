import type { FastifyInstance } from 'fastify';
import { errorBody } from '../openai.js';
import type { MockState } from '../state.js';

const CREATED = 1_700_000_000;

/** `GET /v1/models` and `GET /v1/models/:model`, from the configured list. */
export function registerModels(app: FastifyInstance, state: MockState): void {
  const model = (id: string) => ({
    id,
    object: 'model',
    created: CREATED,
    owned_by: 'holdfast-mock',
  });
  app.get('/v1/models', () => ({ object: 'list', data: state.behaviour.models.map(model) }));
  app.get<{ Params: { model: string } }>('/v1/models/:model', (request, reply) => {
    const { model: id } = request.params;
    if (state.behaviour.models.includes(id)) return model(id);
    return reply
      .code(404)
      .send(
        errorBody(
          `The model '${id}' does not exist`,
          'invalid_request_error',
          'model_not_found',
          'model',
        ),
      );
  });
}
