import type { LightMyRequestResponse } from 'fastify';
import type { Stack, StackOptions } from './harness.js';

/** The admin token of the admin API tests. */
export const ADMIN_TOKEN = 'hf-admin-test-token-4b1d9c0e';

/** Stack options with the admin API on (merged over `extra`). */
export function withAdmin(extra: StackOptions = {}): StackOptions {
  return {
    ...extra,
    edge: { ...extra.edge, options: { ...extra.edge?.options, adminToken: ADMIN_TOKEN } },
  };
}

export interface AdminReply {
  status: number;
  // Test code reads arbitrary fields of the reply.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  headers: LightMyRequestResponse['headers'];
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Calls the edge in-process (inject) with the admin token, or with `token` (null: none).
 * `body` may be an object (JSON) or a string (sent with `contentType`, default YAML).
 */
export function admin(s: Stack, token: string | null = ADMIN_TOKEN) {
  return async (
    method: Method,
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<AdminReply> => {
    const res = await s.edge.app.inject({
      method,
      url,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(typeof body === 'string' ? { 'content-type': 'application/yaml' } : {}),
        ...headers,
      },
      ...(body === undefined ? {} : { payload: body as string | object }),
    });
    let parsed: unknown = res.body;
    try {
      parsed = res.json();
    } catch {
      // Not JSON (HTML, empty): keep the text.
    }
    return { status: res.statusCode, body: parsed, headers: res.headers };
  };
}

/** The `field` (default `id`) of each entry of a list read from a reply. */
export function ids(list: unknown, field = 'id'): string[] {
  return (list as Record<string, unknown>[]).map((x) => String(x[field]));
}
