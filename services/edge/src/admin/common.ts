import type { HoldfastConfig, TenantConfig } from '@holdfast/config';
import { Err, Ok, type Result } from '@holdfast/runtime';
import type { FastifyRequest } from 'fastify';
import { EdgeError } from '../errors.js';
import type { Applied, ConfigEditor, Change } from './editor.js';

/** A key as the admin API shows it: never its hash, never its secret. */
export function keyView(tenant: string, k: TenantConfig['keys'][number]) {
  return {
    id: k.id,
    tenant,
    defaultUseCase: k.defaultUseCase ?? null,
    budgets: k.budgets,
    allowUserHeader: k.allowUserHeader,
    maxEndUsers: k.maxEndUsers ?? null,
  };
}

export function tenantView(t: TenantConfig) {
  return { ...t, keys: t.keys.map((k) => keyView(t.id, k)) };
}

export function notFound(what: string, id: string, param?: string): EdgeError {
  return new EdgeError({
    code: 'not_found',
    message: `Unknown ${what} "${id}".`,
    param: param ?? null,
  });
}

export function alreadyExists(what: string, id: string, param = 'id'): EdgeError {
  return new EdgeError({
    code: 'already_exists',
    message: `A ${what} "${id}" already exists.`,
    param,
  });
}

export function findTenant(doc: HoldfastConfig, id: string): Result<TenantConfig, EdgeError> {
  const t = doc.tenants.find((x) => x.id === id);
  return t ? Ok(t) : Err(notFound('tenant', id, 'tenant'));
}

/** The value of a Result, or its EdgeError thrown to the edge's error handler. */
export function unwrap<T>(r: Result<T, EdgeError>): T {
  if (!r.ok) throw r.error;
  return r.value;
}

export interface Mutation<T> {
  data: T;
  config: Applied;
}

/** Runs an edit for a request: source = the route, expectedVersion from the query. */
export async function editFor<T>(
  editor: ConfigEditor,
  request: FastifyRequest<{ Querystring: { expectedVersion?: number } }>,
  change: Change<T>,
): Promise<Mutation<T>> {
  const r = await editor.edit(change, {
    source: `admin:${request.method} ${request.routeOptions.url ?? request.url}`,
    expectedVersion: request.query.expectedVersion,
  });
  const { value, config } = unwrap(r);
  return { data: value, config };
}
