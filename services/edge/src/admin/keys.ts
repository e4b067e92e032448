import { randomBytes } from 'node:crypto';
import { Err, Ok } from '@holdfast/runtime';
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { sha256Hex } from '../request/auth.js';
import { EdgeError } from '../errors.js';
import { alreadyExists, editFor, findTenant, keyView, notFound, unwrap } from './common.js';
import type { ConfigEditor } from './editor.js';
import { KeyBody, KeyParams, KeyPatch, KeysQuery, TenantParams, VersionQuery } from './schemas.js';

/** A new virtual key: 256 random bits, recognisable by its prefix (secret scanners, logs). */
function newSecret(): string {
  return `sk-hf-${randomBytes(32).toString('base64url')}`;
}

/**
 * Virtual keys. The edge makes the secret, stores only its sha256 in the config and answers
 * the secret once, in the creation response; nothing else ever shows it again.
 */
export function keyRoutes(app: FastifyInstance, editor: ConfigEditor): void {
  app.get<{ Querystring: z.infer<typeof KeysQuery> }>(
    '/keys',
    { schema: { querystring: KeysQuery } },
    async (request) => {
      const { version, config } = unwrap(await editor.read());
      const only = request.query.tenant;
      if (only !== undefined) unwrap(findTenant(config, only));
      const data = config.tenants
        .filter((t) => only === undefined || t.id === only)
        .flatMap((t) => t.keys.map((k) => keyView(t.id, k)));
      return { data, configVersion: version };
    },
  );

  app.get<{ Params: TenantParams }>(
    '/tenants/:tenant/keys',
    { schema: { params: TenantParams } },
    async (request) => {
      const { version, config } = unwrap(await editor.read());
      const t = unwrap(findTenant(config, request.params.tenant));
      return { data: t.keys.map((k) => keyView(t.id, k)), configVersion: version };
    },
  );

  app.post<{ Params: TenantParams; Body: z.infer<typeof KeyBody>; Querystring: VersionQuery }>(
    '/tenants/:tenant/keys',
    { schema: { params: TenantParams, body: KeyBody, querystring: VersionQuery } },
    async (request, reply) => {
      const { id, defaultUseCase, budgets, allowUserHeader, maxEndUsers } = request.body;
      const secret = newSecret();
      const done = await editFor(editor, request, (doc) => {
        const t = findTenant(doc, request.params.tenant);
        if (!t.ok) return t;
        if (doc.tenants.some((x) => x.keys.some((k) => k.id === id)))
          return Err(alreadyExists('key', id));
        if (
          defaultUseCase !== undefined &&
          !t.value.useCases.some((u) => u.id === defaultUseCase)
        ) {
          return Err(
            new EdgeError({
              code: 'invalid_request',
              message: `Invalid request: use case "${defaultUseCase}" is not registered for tenant ${t.value.id}.`,
              param: 'defaultUseCase',
            }),
          );
        }
        const key = {
          id,
          sha256: sha256Hex(secret),
          budgets,
          allowUserHeader,
          ...(defaultUseCase ? { defaultUseCase } : {}),
          ...(maxEndUsers === undefined ? {} : { maxEndUsers }),
        };
        t.value.keys.push(key);
        return Ok(keyView(t.value.id, key));
      });
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({ ...done, secret });
    },
  );

  app.patch<{
    Params: z.infer<typeof KeyParams>;
    Body: z.infer<typeof KeyPatch>;
    Querystring: VersionQuery;
  }>(
    '/tenants/:tenant/keys/:key',
    { schema: { params: KeyParams, body: KeyPatch, querystring: VersionQuery } },
    (request) =>
      editFor(editor, request, (doc) => {
        const t = findTenant(doc, request.params.tenant);
        if (!t.ok) return t;
        const key = t.value.keys.find((k) => k.id === request.params.key);
        if (!key) return Err(notFound('key', request.params.key, 'key'));
        const { defaultUseCase, budgets, allowUserHeader, maxEndUsers } = request.body;
        if (defaultUseCase === null) delete key.defaultUseCase;
        else if (defaultUseCase !== undefined) key.defaultUseCase = defaultUseCase;
        if (budgets !== undefined) key.budgets = budgets;
        if (allowUserHeader !== undefined) key.allowUserHeader = allowUserHeader;
        if (maxEndUsers === null) delete key.maxEndUsers;
        else if (maxEndUsers !== undefined) key.maxEndUsers = maxEndUsers;
        return Ok(keyView(t.value.id, key));
      }),
  );

  app.delete<{ Params: z.infer<typeof KeyParams>; Querystring: VersionQuery }>(
    '/tenants/:tenant/keys/:key',
    { schema: { params: KeyParams, querystring: VersionQuery } },
    (request) =>
      editFor(editor, request, (doc) => {
        const t = findTenant(doc, request.params.tenant);
        if (!t.ok) return t;
        const at = t.value.keys.findIndex((k) => k.id === request.params.key);
        if (at < 0) return Err(notFound('key', request.params.key, 'key'));
        t.value.keys.splice(at, 1);
        return Ok({ id: request.params.key, tenant: t.value.id, deleted: true });
      }),
  );
}
