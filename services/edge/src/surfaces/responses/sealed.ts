import { createHash } from 'node:crypto';

/**
 * The id sealed content is owned under (SEALED_ID: `ec_` and the SHA-256 of the content, in
 * hex): what a call's output carried as a reasoning item's `encrypted_content` is recorded as
 * its team's with the call's settle, and a call sending it back is admitted only for that team.
 * The edge never reads the content: the digest names it, whatever it holds.
 */
export function sealedId(content: string): string {
  return `ec_${createHash('sha256').update(content).digest('hex')}`;
}
