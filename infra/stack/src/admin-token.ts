import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ADMIN_TOKEN_FILE, readAdminToken } from '@holdfast/config';

export interface AdminToken {
  token: string;
  /** Where it is kept; undefined when it came from EDGE_ADMIN_TOKEN. */
  file: string | undefined;
}

/**
 * The edge's admin token, so the admin API and `holdfast` work out of the box: EDGE_ADMIN_TOKEN
 * when set, else the token kept in `<dir>/admin-token`, made (256 random bits, mode 0600) on
 * the stack's first start and kept across restarts, where `holdfast` reads it.
 */
export async function stackAdminToken(dir: string, given: string | undefined): Promise<AdminToken> {
  if (given) return { token: given, file: undefined };
  const file = join(dir, ADMIN_TOKEN_FILE);
  const kept = readAdminToken(dir);
  if (kept) return { token: kept, file };
  const token = `hf-admin-${randomBytes(32).toString('base64url')}`;
  // wx: a second stack racing for the same dir fails here instead of overwriting the token.
  await writeFile(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  return { token, file };
}
