import { createHash, timingSafeEqual } from 'node:crypto';

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/**
 * Whether a presented token is the admin token, compared in constant time: both sides are
 * hashed to 32 bytes first, so neither the content nor the length of the token leaks.
 */
export function isAdminToken(given: string | undefined, adminToken: string | undefined): boolean {
  if (given === undefined || adminToken === undefined) return false;
  return timingSafeEqual(digest(given), digest(adminToken));
}
