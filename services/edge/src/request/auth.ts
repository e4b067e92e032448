import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { CompiledConfig, CompiledTenant } from '@holdfast/config';
import { TenantId, UseCaseId } from '@holdfast/events';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';

/** Who is calling: the tenant (team), the virtual key (null in trustHeaders mode), the use case. */
export interface Caller {
  tenant: CompiledTenant;
  keyId: string | null;
  /** The use case id, well-formed but not necessarily registered (the authority decides). */
  useCase: string;
  /** The caller may name the call's end user in `x-holdfast-user` (its key allows it, or trusted headers). */
  namesUsers: boolean;
}

const BEARER = /^Bearer +(\S+) *$/i;

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The token of an `Authorization: Bearer <token>` header, if the header has that form. */
export function bearerToken(authorization: string | string[] | undefined): string | undefined {
  const value = single(authorization);
  return value === undefined ? undefined : BEARER.exec(value)?.[1];
}

/** The hex sha256 of a text's UTF-8 (one-shot: no Hash object per call, as on every request). */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/**
 * Authenticates a request from its headers alone, before its body is read:
 * `Authorization: Bearer <virtual key>` or `x-api-key: <virtual key>` (Anthropic's client;
 * sha256 looked up in the config), or `x-team` when the deployment trusts headers. The use case is `x-use-case`, else the key's default, else
 * the tenant's only one. Ids that are not even well-formed are refused here; registered ones
 * are the authority's call, so that its refusals are recorded as events.
 */
export function authenticate(
  headers: IncomingHttpHeaders,
  cfg: CompiledConfig,
): Result<Caller, EdgeError> {
  let tenant: CompiledTenant | undefined;
  let keyId: string | null = null;
  let defaultUseCase: string | undefined;
  let namesUsers = true;

  if (cfg.raw.auth.trustHeaders) {
    const team = single(headers['x-team']);
    if (team === undefined || team === '') {
      return fail('unknown_tenant', 'No team: send the x-team header.');
    }
    tenant = TenantId.safeParse(team).success ? cfg.tenants.get(team) : undefined;
    if (!tenant) return fail('unknown_tenant', `Unknown team "${printable(team)}".`);
  } else {
    const authorization = single(headers.authorization);
    // Anthropic's client sends its key as x-api-key; a Bearer token wins when both are sent.
    const apiKey = single(headers['x-api-key']);
    if (!authorization && !apiKey) {
      return fail(
        'invalid_api_key',
        'Missing API key: send Authorization: Bearer <your Holdfast key> (or x-api-key: <key>).',
      );
    }
    const secret = bearerToken(authorization) ?? (apiKey || undefined);
    const key = secret === undefined ? undefined : cfg.keysByHash.get(sha256Hex(secret));
    const owner = key && cfg.tenants.get(key.tenant);
    if (!key || !owner) return fail('invalid_api_key', 'Incorrect API key provided.');
    tenant = owner;
    keyId = key.keyId;
    defaultUseCase = key.defaultUseCase;
    namesUsers = key.allowUserHeader;
  }

  const header = single(headers['x-use-case']);
  const only = tenant.useCases.size === 1 ? [...tenant.useCases.keys()][0] : undefined;
  const useCase = header ?? defaultUseCase ?? only;
  if (useCase === undefined) {
    return fail(
      'use_case_not_registered',
      `Team ${tenant.id} has ${tenant.useCases.size} use cases: send the x-use-case header.`,
    );
  }
  if (!UseCaseId.safeParse(useCase).success) {
    return fail(
      'use_case_not_registered',
      `Use case "${printable(useCase)}" is not registered for team ${tenant.id}.`,
    );
  }
  return Ok({ tenant, keyId, useCase, namesUsers });
}

/** The headers that say who calls, for whom and why: each is read as one value. */
const ONCE: ReadonlySet<string> = new Set([
  'authorization',
  'x-api-key',
  'x-team',
  'x-use-case',
  'x-holdfast-user',
]);

/**
 * A header of ONCE the request sends more than once, as a 400 naming it. Node keeps only the
 * first `Authorization` (so a second key went unseen) and joins the others (`alice, bob`: an end
 * user that is neither); a request that names two callers, use cases or end users says none.
 * One pass over the raw header list, allocating nothing unless such a header is there.
 */
export function repeatedHeader(raw: readonly string[]): EdgeError | undefined {
  let seen: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Fast path: no header of ONCE is shorter than 6 or longer than 15 characters.
    if (name.length < 6 || name.length > 15) continue;
    const lower = name.toLowerCase();
    if (!ONCE.has(lower)) continue;
    if (seen?.includes(lower)) {
      const message = `Send the ${lower} header once.`;
      return new EdgeError({ code: 'invalid_request', message, param: lower });
    }
    (seen ??= []).push(lower);
  }
  return undefined;
}

function fail(code: EdgeError['code'], message: string): Result<never, EdgeError> {
  return Err(new EdgeError({ code, message }));
}

/** A header value as it may appear in a message: printable ASCII, at most 64 characters. */
export function printable(value: string): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 64 ? `${clean.slice(0, 64)}...` : clean;
}
