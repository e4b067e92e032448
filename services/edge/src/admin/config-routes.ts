import type { FastifyInstance } from 'fastify';
import { EdgeError } from '../errors.js';
import { unwrap } from './common.js';
import type { ConfigEditor } from './editor.js';
import { ConfigPutQuery } from './schemas.js';

/** Content types read as a YAML (or JSON) text document; JSON bodies arrive parsed. */
export const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml'];

/**
 * The whole document: read it (with the last declared document and what the admin API changed
 * since), or apply one (YAML or JSON body): merged by default, so what the admin API changed
 * and the document leaves alone stays; `?mode=replace` makes the stored config the document.
 */
export function configRoutes(app: FastifyInstance, editor: ConfigEditor): void {
  app.get('/config', async () => unwrap(await editor.read()));

  app.put<{ Querystring: ConfigPutQuery; Body: unknown }>(
    '/config',
    { schema: { querystring: ConfigPutQuery } },
    async (request) => {
      const body = request.body;
      const document =
        typeof body === 'string'
          ? body
          : body !== null && typeof body === 'object' && !Array.isArray(body)
            ? (body as Record<string, unknown>)
            : undefined;
      if (document === undefined || (typeof document === 'string' && document.trim() === '')) {
        throw new EdgeError({
          code: 'invalid_request',
          message:
            'Invalid request: send the whole config document as the body (YAML with Content-Type: application/yaml, or a JSON object).',
        });
      }
      const applied = await editor.apply(document, {
        source: 'admin:PUT /admin/config',
        expectedVersion: request.query.expectedVersion,
        mode: request.query.mode,
      });
      return unwrap(applied);
    },
  );
}
