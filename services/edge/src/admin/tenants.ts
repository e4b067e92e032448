import { formatIssues, Tenant } from '@holdfast/config';
import { Err, Ok } from '@holdfast/runtime';
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { fromAuthority } from '../authority/errors.js';
import { EdgeError } from '../errors.js';
import { alreadyExists, editFor, findTenant, notFound, tenantView, unwrap } from './common.js';
import type { ConfigEditor } from './editor.js';
import {
  EndUserParams,
  SuspendBody,
  TenantBody,
  TenantParams,
  TenantPatch,
  VersionQuery,
} from './schemas.js';
import { printable } from '../request/auth.js';
import { endUserLookupId } from '../request/end-user.js';

/** Fields with routes of their own; a PATCH cannot touch them (nor the id). */
const NOT_PATCHABLE = new Set(['id', 'budgets', 'useCases', 'keys']);

type WithTenant = { Params: TenantParams; Querystring: VersionQuery };

/** Tenants (teams and orgs) and their suspension. */
export function tenantRoutes(app: FastifyInstance, editor: ConfigEditor): void {
  app.get('/tenants', async () => {
    const { version, config } = unwrap(await editor.read());
    return { data: config.tenants.map(tenantView), configVersion: version };
  });

  app.get<WithTenant>('/tenants/:tenant', { schema: { params: TenantParams } }, async (request) => {
    const { version, config } = unwrap(await editor.read());
    return {
      data: tenantView(unwrap(findTenant(config, request.params.tenant))),
      configVersion: version,
    };
  });

  app.post<{ Body: z.infer<typeof TenantBody>; Querystring: VersionQuery }>(
    '/tenants',
    { schema: { body: TenantBody, querystring: VersionQuery } },
    async (request, reply) => {
      const tenant = request.body;
      const done = await editFor(editor, request, (doc) => {
        if (doc.tenants.some((t) => t.id === tenant.id))
          return Err(alreadyExists('tenant', tenant.id));
        doc.tenants.push(tenant);
        return Ok(tenantView(tenant));
      });
      return reply.code(201).send(done);
    },
  );

  app.patch<WithTenant & { Body: z.infer<typeof TenantPatch> }>(
    '/tenants/:tenant',
    { schema: { params: TenantParams, body: TenantPatch, querystring: VersionQuery } },
    async (request) => {
      const patch = request.body;
      const fixed = Object.keys(patch).find((k) => NOT_PATCHABLE.has(k));
      if (fixed !== undefined) {
        throw new EdgeError({
          code: 'invalid_request',
          message: `Invalid request: "${fixed}" cannot be patched${fixed === 'id' ? '' : `: use /admin/tenants/{id}/${fixed === 'useCases' ? 'use-cases' : fixed}`}.`,
          param: fixed,
        });
      }
      return editFor(editor, request, (doc) => {
        const found = findTenant(doc, request.params.tenant);
        if (!found.ok) return found;
        const merged: Record<string, unknown> = { ...found.value };
        for (const [k, v] of Object.entries(patch)) {
          if (v === null) delete merged[k];
          else merged[k] = v;
        }
        const parsed = Tenant.safeParse(merged);
        if (!parsed.success) {
          return Err(
            new EdgeError({
              code: 'invalid_request',
              message: `Invalid request: ${formatIssues(parsed.error.issues, merged, Tenant).join('; ')}`,
              param: parsed.error.issues[0]?.path.join('.') ?? null,
            }),
          );
        }
        doc.tenants[doc.tenants.indexOf(found.value)] = parsed.data;
        return Ok(tenantView(parsed.data));
      });
    },
  );

  app.delete<WithTenant>(
    '/tenants/:tenant',
    { schema: { params: TenantParams, querystring: VersionQuery } },
    (request) =>
      editFor(editor, request, (doc) => {
        const found = findTenant(doc, request.params.tenant);
        if (!found.ok) return found;
        doc.tenants.splice(doc.tenants.indexOf(found.value), 1);
        return Ok({ id: found.value.id, deleted: true });
      }),
  );

  /** A tenant's usage as the authority reads it (one end user's windows, given `endUser`). */
  const usageOf = async (tenant: string, endUser?: string) => {
    if (!app.configSnapshot.current?.tenants.has(tenant))
      throw notFound('tenant', tenant, 'tenant');
    const r = await app.authority.usage({ tenant, ...(endUser ? { endUser } : {}) });
    if (!r.ok) throw fromAuthority(r.error);
    return { time: r.value.time, usage: r.value.tenants[0]! };
  };

  app.get<WithTenant>(
    '/tenants/:tenant/end-users',
    { schema: { params: TenantParams } },
    async (request) => {
      const { time, usage } = await usageOf(request.params.tenant);
      return { data: usage.endUsers, tracked: usage.endUserCount, time };
    },
  );

  app.get<{ Params: z.infer<typeof EndUserParams> }>(
    '/tenants/:tenant/end-users/:user',
    { schema: { params: EndUserParams } },
    async (request) => {
      const { tenant, user } = request.params;
      const id = endUserLookupId(user)!;
      const { time, usage } = await usageOf(tenant, id);
      const found = usage.endUsers.find((u) => u.id === id);
      if (!found) throw notFound('end user', printable(user), 'user');
      return { data: found, time };
    },
  );

  for (const op of ['suspend', 'resume'] as const) {
    app.post<WithTenant & { Body: z.infer<typeof SuspendBody> }>(
      `/tenants/:tenant/${op}`,
      {
        schema:
          op === 'suspend' ? { params: TenantParams, body: SuspendBody } : { params: TenantParams },
      },
      async (request) => {
        const { tenant } = request.params;
        if (!app.configSnapshot.current?.tenants.has(tenant))
          throw notFound('tenant', tenant, 'tenant');
        const r =
          op === 'suspend'
            ? await app.authority.suspend({
                tenant,
                by: 'admin',
                reason: request.body?.reason ?? 'suspended by an admin',
                graceMs: request.body?.graceMs ?? 0,
              })
            : await app.authority.resume({ tenant, by: 'admin' });
        if (!r.ok) throw fromAuthority(r.error);
        // This edge forgets the team's suspension at once (the others on its tenant.resumed).
        if (op === 'resume') app.refusals.resumed(tenant);
        return { data: r.value };
      },
    );
  }
}
