import type { CompiledModel } from '@holdfast/config';
import { Err, Ok } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';
import type { Counted } from './adapter.js';

/** Where a request carries input the edge cannot size: a file or document, by its path. */
export interface UnseenInput {
  /** The field path (`messages.0.content.1`), the 400's param. */
  param: string;
  /** What it is (`a file part`, `a document block`). */
  what: string;
}

/**
 * A call whose input only its upstream can count (a file: the provider reads it as its pages,
 * the text and an image of each, which the request's own bytes do not show) and whose
 * upstream did not count it: admitted with the model's stated allowance on top of the local
 * count, else refused with a 400 that says why. `why` says why the upstream did not count it.
 */
export function countUnseen(
  unseen: UnseenInput,
  local: () => Promise<number>,
  model: CompiledModel | undefined,
  why: string,
): Promise<Counted> | Counted {
  const allowance = model?.upstreamStateAllowanceTokens;
  if (allowance !== undefined) return local().then((n) => Ok(n + allowance));
  return Err(
    new EdgeError({
      code: 'invalid_request',
      param: unseen.param,
      message:
        `This call sends ${unseen.what} (${unseen.param}): the provider bills a file by its pages, ` +
        `which Holdfast cannot count from the request, and ${why}. Send its text instead, or have ` +
        `the model configured with upstreamStateAllowanceTokens.`,
    }),
  );
}
