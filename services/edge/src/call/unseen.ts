import type { CompiledModel } from '@holdfast/config';
import { Err, Ok } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';
import type { Counted } from './adapter.js';

/**
 * One input of a request the edge cannot size (a file, a document, a tool the provider runs),
 * by its path. The finders list every one: each gets the model's allowance, and the first
 * names a refusal.
 */
export interface UnseenInput {
  /** The field path (`messages.0.content.1`), the 400's param. */
  param: string;
  /** What it is (`a file part`, `a document block`). */
  what: string;
  /** How the provider bills it, for the 400 (a file: by its pages). */
  billed?: string;
  /** What the client can do instead, for the 400 (a file: send its text). */
  instead?: string;
}

/**
 * A call whose input only its upstream can count (a file: the provider reads it as its pages,
 * the text and an image of each, which the request's own bytes do not show) and whose
 * upstream did not count it: admitted with the model's stated allowance for each such input on
 * top of the local count (twenty files are not one), else refused with a 400 that says why.
 * `why` says why the upstream did not count it.
 */
export function countUnseen(
  unseen: readonly [UnseenInput, ...UnseenInput[]],
  local: () => Promise<number>,
  model: CompiledModel | undefined,
  why: string,
): Promise<Counted> | Counted {
  const allowance = model?.upstreamStateAllowanceTokens;
  if (allowance !== undefined) return local().then((n) => Ok(n + allowance * unseen.length));
  const [first] = unseen;
  return Err(
    new EdgeError({
      code: 'invalid_request',
      param: first.param,
      message:
        `This call sends ${first.what} (${first.param}): ${first.billed ?? 'the provider bills a file by its pages'}, ` +
        `which Holdfast cannot count from the request, and ${why}. ${first.instead ?? 'Send its text instead'}, ` +
        `or have the model configured with upstreamStateAllowanceTokens.`,
    }),
  );
}

/**
 * A call that offers the model a tool the provider runs itself (web search, fetch, code
 * execution, MCP): what it reads is billed as input, and no count of the request (the
 * upstream's counting endpoints included) can see it. Admitted with the model's stated
 * allowance for each such tool on top of its count, else refused with a 400 naming the first.
 */
export async function withProviderTool(
  tools: readonly UnseenInput[],
  model: CompiledModel | undefined,
  count: () => Promise<Counted>,
): Promise<Counted> {
  const [tool] = tools;
  if (!tool) return count();
  const allowance = model?.upstreamStateAllowanceTokens;
  if (allowance === undefined) {
    return Err(
      new EdgeError({
        code: 'invalid_request',
        param: tool.param,
        message:
          `This call offers ${tool.what} (${tool.param}), which the provider runs itself and bills ` +
          `what it reads (search results, fetched pages, tool output) as input: Holdfast cannot ` +
          `bound that before the call. Offer it as a function tool and run it yourself, or have ` +
          `the model configured with upstreamStateAllowanceTokens.`,
      }),
    );
  }
  const counted = await count();
  return counted.ok ? Ok(counted.value + allowance * tools.length) : counted;
}

/** Responses tools the client runs (their results come back as visible input); others run upstream. */
const CLIENT_RESPONSES_TOOLS = new Set([
  'function',
  'custom',
  'computer_use_preview',
  'local_shell',
]);

/** The Responses tools the provider runs itself (any type but the client's own). */
export function responsesProviderTools(
  tools: readonly { type: string }[] | null | undefined,
): UnseenInput[] {
  return (tools ?? []).flatMap((t, i) =>
    CLIENT_RESPONSES_TOOLS.has(t.type) ? [] : [{ param: `tools.${i}`, what: `the ${t.type} tool` }],
  );
}
