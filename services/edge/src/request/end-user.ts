import { createHash } from 'node:crypto';
import { Err, Ok, type Result } from '@holdfast/runtime';
import type { IncomingHttpHeaders } from 'node:http';
import type { Caller } from './auth.js';
import { EdgeError } from '../errors.js';

/** What an end user id may be as sent: printable ASCII without ';' or ',' (see EndUserId). */
const PLAIN = /^[\x21-\x2b\x2d-\x3a\x3c-\x7e]{1,128}$/;

/** What `endUserId` makes of an id that is not plain: `sha256:` and 32 hex digits. */
const HASHED = /^sha256:[0-9a-f]{32}$/;

/** The header a trusted backend names the end user in (where its key allows it). */
const END_USER_HEADER = 'x-holdfast-user';

/**
 * The end user as Holdfast keys budgets and books by it: the client's own id when it is
 * printable ASCII of at most 128 characters without ';' or ','; otherwise `sha256:` and the
 * first 32 hex digits of its SHA-256 (`hashed`), so any string (an email, Unicode, a 10 KB blob)
 * maps to one stable, bounded id. An id sent in that hashed form is hashed too: kept as sent, it would
 * be the end user whose id hashes to it, and spend that one's windows. Empty means none.
 */
function endUserId(raw: string): string | undefined {
  if (raw === '') return undefined;
  if (PLAIN.test(raw) && !HASHED.test(raw)) return raw;
  return `sha256:${createHash('sha256').update(hashed(raw)).digest('hex').slice(0, 32)}`;
}

/** A lone surrogate (a UTF-16 code unit no pair completes). */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * The bytes an id is hashed as: its UTF-8, or, for a string UTF-8 cannot hold (a lone
 * surrogate, which it writes as U+FFFD, so 'a\ud800', 'a\udbff' and 'a\ufffd' were one end
 * user), 0xff (never a byte of UTF-8) and its UTF-16 code units.
 */
function hashed(raw: string): Buffer {
  if (!LONE_SURROGATE.test(raw)) return Buffer.from(raw, 'utf8');
  return Buffer.concat([Buffer.from([0xff]), Buffer.from(raw, 'utf16le')]);
}

/**
 * The first body field that names an end user (chat and Responses: `user`, else
 * `safety_identifier`). An empty one names no one (endUserId), so it does not hide the next: a
 * client sending `user: ""` beside its `safety_identifier` would be charged to no end user.
 */
export function bodyEndUser(...fields: (string | null | undefined)[]): string | null {
  return fields.find((f) => f !== undefined && f !== null && f !== '') ?? null;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header's text: Node reads its bytes as Latin-1, so a name sent in UTF-8 ('josé') comes out
 * as 'josÃ©', another end user than the body's 'josé'. Bytes that are UTF-8 are read as UTF-8;
 * others (a Latin-1 client) stay as Node read them.
 */
function headerText(value: string): string {
  if (!/[\u0080-\u00ff]/.test(value)) return value;
  try {
    return UTF8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return value;
  }
}

/**
 * The end user a lookup names (`?end_user=`, the admin API): an id as Holdfast lists it (the
 * hashed form) is that end user; any other is mapped as admission maps it.
 */
export function endUserLookupId(raw: string): string | undefined {
  return HASHED.test(raw) ? raw : endUserId(raw);
}

/**
 * The call's end user: `x-holdfast-user` when the caller may name one (its key has
 * `allowUserHeader`, or the edge trusts headers), else what the body says (OpenAI `user`,
 * Anthropic `metadata.user_id`). The header from a key that may not send it is a 400, not
 * ignored: a backend that believes it set per-user budgets must hear that it did not.
 */
export function resolveEndUser(
  headers: IncomingHttpHeaders,
  caller: Pick<Caller, 'namesUsers' | 'keyId'>,
  fromBody: string | null,
): Result<string | undefined, EdgeError> {
  const header = headers[END_USER_HEADER];
  if (header !== undefined) {
    if (Array.isArray(header)) {
      return Err(
        new EdgeError({
          code: 'invalid_request',
          message: `Send ${END_USER_HEADER} once.`,
          param: END_USER_HEADER,
        }),
      );
    }
    if (!caller.namesUsers) {
      return Err(
        new EdgeError({
          code: 'invalid_request',
          message: `Key ${caller.keyId ?? ''} may not name the end user in ${END_USER_HEADER} (its allowUserHeader is off); send the body's user field instead.`,
          param: END_USER_HEADER,
        }),
      );
    }
    return Ok(endUserId(headerText(header)));
  }
  return Ok(fromBody === null ? undefined : endUserId(fromBody));
}
