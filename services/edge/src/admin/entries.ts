import type { BudgetConfig, TenantConfig } from '@holdfast/config';
import type { BudgetUnit, BudgetWindow } from '@holdfast/events';
import { Err, Ok } from '@holdfast/runtime';
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { editFor, findTenant, notFound, unwrap } from './common.js';
import type { ConfigEditor } from './editor.js';
import {
  BudgetBody,
  BudgetParams,
  ModelParams,
  PriceBody,
  TenantParams,
  UseCaseBody,
  UseCaseParams,
  VersionQuery,
} from './schemas.js';

/** A list inside each tenant (budgets, use cases), managed by id under the tenant's URL. */
interface TenantList<T, B> {
  /** URL segment and id parameter: `/tenants/:tenant/<path>/:<param>`. */
  path: string;
  param: string;
  what: string;
  params: z.ZodType;
  body: z.ZodType<B>;
  items: (t: TenantConfig) => T[];
  idOf: (item: T) => string;
  make: (id: string, body: B) => T;
  view: (item: T) => unknown;
}

type Req = { Params: Record<string, string>; Querystring: VersionQuery };

/** GET the list; PUT one (creates, 201, or replaces, 200); DELETE one. */
function tenantList<T, B>(app: FastifyInstance, editor: ConfigEditor, l: TenantList<T, B>): void {
  const one = `/tenants/:tenant/${l.path}/:${l.param}`;
  app.get<{ Params: TenantParams }>(
    `/tenants/:tenant/${l.path}`,
    { schema: { params: TenantParams } },
    async (request) => {
      const { version, config } = unwrap(await editor.read());
      const t = unwrap(findTenant(config, request.params.tenant));
      return { data: l.items(t).map(l.view), configVersion: version };
    },
  );

  app.put<Req & { Body: B }>(
    one,
    { schema: { params: l.params, body: l.body, querystring: VersionQuery } },
    async (request, reply) => {
      const item = l.make(request.params[l.param]!, request.body as B);
      let created = false;
      const done = await editFor(editor, request, (doc) => {
        const t = findTenant(doc, request.params.tenant!);
        if (!t.ok) return t;
        const list = l.items(t.value);
        const at = list.findIndex((x) => l.idOf(x) === l.idOf(item));
        created = at < 0;
        if (created) list.push(item);
        else list[at] = item;
        return Ok(l.view(item));
      });
      return reply.code(created ? 201 : 200).send(done);
    },
  );

  app.delete<Req>(one, { schema: { params: l.params, querystring: VersionQuery } }, (request) =>
    editFor(editor, request, (doc) => {
      const t = findTenant(doc, request.params.tenant!);
      if (!t.ok) return t;
      const id = request.params[l.param]!;
      const list = l.items(t.value);
      const at = list.findIndex((x) => l.idOf(x) === id);
      if (at < 0) return Err(notFound(l.what, id, l.param));
      list.splice(at, 1);
      return Ok({ id, tenant: t.value.id, deleted: true });
    }),
  );
}

/**
 * The entries inside tenants and models: budgets (by id `<window>-<unit>`), use cases, and
 * model prices.
 */
export function entryRoutes(app: FastifyInstance, editor: ConfigEditor): void {
  tenantList(app, editor, {
    path: 'budgets',
    param: 'budget',
    what: 'budget',
    params: BudgetParams,
    body: BudgetBody,
    items: (t) => t.budgets,
    idOf: (b: BudgetConfig) => `${b.window}-${b.unit}`,
    make: (id, body: z.infer<typeof BudgetBody>): BudgetConfig => {
      const [window, unit] = id.split('-') as [BudgetWindow, BudgetUnit];
      return { window, unit, ...body };
    },
    view: (b) => ({ id: `${b.window}-${b.unit}`, ...b }),
  });
  tenantList(app, editor, {
    path: 'use-cases',
    param: 'useCase',
    what: 'use case',
    params: UseCaseParams,
    body: UseCaseBody,
    items: (t) => t.useCases,
    idOf: (u) => u.id,
    make: (id, body) => ({ id, ...body }),
    view: (u) => u,
  });

  app.get('/models', async () => {
    const { version, config } = unwrap(await editor.read());
    return { data: config.models, configVersion: version };
  });

  app.put<{
    Params: z.infer<typeof ModelParams>;
    Body: z.infer<typeof PriceBody>;
    Querystring: VersionQuery;
  }>(
    '/models/:model/price',
    { schema: { params: ModelParams, body: PriceBody, querystring: VersionQuery } },
    (request) =>
      editFor(editor, request, (doc) => {
        const model = doc.models.find((m) => m.id === request.params.model);
        if (!model) return Err(notFound('model', request.params.model, 'model'));
        model.price = request.body;
        return Ok(model);
      }),
  );
}
