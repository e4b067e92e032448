import { CliError } from '../client.js';
import { context, parse, required, type Io } from '../context.js';
import { EXIT } from '../exit.js';
import { table } from '../format.js';

interface KeyView {
  id: string;
  tenant: string;
  defaultUseCase: string | null;
}

/**
 * `holdfast keys create --tenant T --id ID [--use-case UC]` (prints the secret, once, alone on
 * stdout), `holdfast keys list [--tenant T]`, `holdfast keys delete --tenant T --id ID`.
 */
export async function keys(args: string[], io: Io): Promise<number> {
  const [sub, ...rest] = args;
  const { values, positionals } = parse(rest, {
    tenant: { type: 'string' },
    id: { type: 'string' },
    'use-case': { type: 'string' },
  });
  if (positionals.length > 0)
    throw new CliError(`unexpected argument "${positionals[0]}"`, EXIT.usage);
  const ctx = context(io, values);
  const tenant = values.tenant;
  switch (sub) {
    case 'create': {
      const t = encodeURIComponent(required(tenant, 'tenant'));
      const body = {
        id: required(values.id, 'id'),
        ...(values['use-case'] ? { defaultUseCase: values['use-case'] } : {}),
      };
      const r = (await ctx
        .client()
        .request('POST', `/admin/tenants/${t}/keys`, { json: body })) as {
        data: KeyView;
        secret: string;
      };
      if (ctx.json) {
        ctx.print({ ...r.data, secret: r.secret }, '');
      } else {
        io.stdout(`${r.secret}\n`);
        io.stderr(
          `created key ${r.data.id} for tenant ${r.data.tenant}: the secret above is shown once; store it now\n`,
        );
      }
      return EXIT.ok;
    }
    case 'list': {
      const query = tenant === undefined ? '' : `?tenant=${encodeURIComponent(tenant)}`;
      const r = (await ctx.client().request('GET', `/admin/keys${query}`)) as { data: KeyView[] };
      ctx.print(
        r.data,
        r.data.length === 0
          ? 'no keys\n'
          : table(
              ['TENANT', 'KEY', 'DEFAULT USE CASE'],
              r.data.map((k) => [k.tenant, k.id, k.defaultUseCase ?? '-']),
            ),
      );
      return EXIT.ok;
    }
    case 'delete': {
      const t = encodeURIComponent(required(tenant, 'tenant'));
      const id = encodeURIComponent(required(values.id, 'id'));
      const r = await ctx.client().request('DELETE', `/admin/tenants/${t}/keys/${id}`);
      ctx.print(r, `deleted key ${values.id} of tenant ${tenant}\n`);
      return EXIT.ok;
    }
    default:
      throw new CliError(
        `unknown keys command "${sub ?? ''}": use create, list or delete`,
        EXIT.usage,
      );
  }
}
