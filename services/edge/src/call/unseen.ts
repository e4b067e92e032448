import { toolUseKind, type CompiledModel } from '@holdfast/config';
import { LIMITS } from '@holdfast/events';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';
import type { CountError } from '../upstream/counting.js';
import type { Counted } from './adapter.js';
import { clientBound } from './tool-uses.js';

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
 * `why` says why the upstream did not count it. A count that works later (the upstream's
 * counting rate-limited, the tenant's share of its connections taken) is the 429 to retry
 * whatever the allowance: the allowance stands for input no count can see, and state the
 * upstream can count (a previous response of any length) held at it would be billed past the
 * hold, when a team can reach those states by counting a lot.
 */
export function countUnseen(
  unseen: readonly [UnseenInput, ...UnseenInput[]],
  local: () => Promise<number>,
  model: CompiledModel | undefined,
  why: string,
  failed?: CountError,
): Promise<Counted> | Counted {
  const later = failed && countLater(failed);
  if (later) return Err(later);
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
 * A count that may work later, as the refusal a client retries: the tenant's own share of the
 * upstream's connections is open (429 `concurrency_limit`, as a call past it gets), or the
 * upstream rate-limits its counting (429 `upstream_rate_limited` with its Retry-After). Not
 * the call's fault, so not a 400.
 */
function countLater(failed: CountError): EdgeError | undefined {
  if (failed.code === 'count_busy') {
    return new EdgeError({
      code: 'concurrency_limit',
      message: `This call's input can only be counted by its upstream, and ${failed.message}. Retry when its calls there end.`,
      headers: { 'retry-after': '1' },
    });
  }
  if (failed.code === 'count_limited') {
    const seconds = Math.max(1, Math.ceil((failed.retryAfterMs ?? 1_000) / 1_000));
    return new EdgeError({
      code: 'upstream_rate_limited',
      message: `This call's input can only be counted by its upstream, and ${failed.message}. Retry after ${seconds} s.`,
      headers: { 'retry-after': String(seconds) },
    });
  }
  return undefined;
}

/**
 * A tool the provider runs itself (web search, fetch, code execution, MCP), by its path: what
 * it reads is billed as input. `counted`: the provider counts its uses (a search, a fetch, a
 * file search: `toolUseKind`), each reading its own results; `maxUses` its own bound as sent
 * (Messages `max_uses`).
 */
export interface ProviderTool extends UnseenInput {
  counted: boolean;
  maxUses?: unknown;
}

/**
 * How many reads of the model's allowance a call's provider-run tools are held, and the bound
 * the client set that gives most of them (the 400's param when they do not fit), if any.
 */
export interface ToolReads {
  reads: number;
  param: string | undefined;
}

/**
 * A call that offers the model a tool the provider runs itself: what it reads is billed as
 * input, and no count of the request (the upstream's counting endpoints included) can see it.
 * Admitted with the model's stated allowance for each read (`reads`: each use where the client
 * bounds the uses, docs/budgets.md "How unseen tool input is held") on top of its count, else
 * refused with a 400 naming the first tool, or the bound when the reads are held past the
 * model's `maxPromptTokens` or Holdfast's limit on a prompt.
 */
export async function withProviderTool(
  tools: readonly ProviderTool[],
  model: CompiledModel | undefined,
  reads: (tools: readonly [ProviderTool, ...ProviderTool[]]) => Result<ToolReads, EdgeError>,
  count: () => Promise<Counted>,
): Promise<Counted> {
  const [tool, ...more] = tools;
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
  const held = reads([tool, ...more]);
  if (!held.ok) return held;
  const counted = await count();
  if (!counted.ok) return counted;
  const unseen = allowance * held.value.reads;
  const total = counted.value + unseen;
  const cap = Math.min(model?.maxPromptTokens ?? Infinity, LIMITS.maxPromptTokens);
  const { param } = held.value;
  if (total <= cap || param === undefined) return Ok(total);
  const n = (v: number) => v.toLocaleString('en-US');
  const what = model?.maxPromptTokens === cap ? `model ${model.id}'s maxPromptTokens` : 'the limit';
  return Err(
    new EdgeError({
      code: 'invalid_request',
      param,
      message:
        `This call's provider-run tools may read ${n(held.value.reads)} times (${param}), each held ` +
        `${n(allowance)} input tokens (the model's upstreamStateAllowanceTokens): ${n(unseen)} on top ` +
        `of the prompt's ${n(counted.value)} is ${n(total)}, above ${what} (${n(cap)}). Lower ${param}.`,
    }),
  );
}

/**
 * Messages: a server tool whose uses the provider counts (web search, web fetch) reads its
 * results on each use, up to its `max_uses`, which the client must set (an integer from 1 to
 * 1,000); any other (code execution, an MCP server: no bound the client can set, a turn the
 * provider's own server loop ends) reads once.
 */
export function perToolReads(tools: readonly ProviderTool[]): Result<ToolReads, EdgeError> {
  let reads = 0;
  let most: { param: string; uses: number } | undefined;
  for (const tool of tools) {
    if (!tool.counted) {
      reads += 1;
      continue;
    }
    const param = `${tool.param}.max_uses`;
    const bound = clientBound(
      'max_uses',
      param,
      tool.maxUses,
      `This call offers ${tool.what} (${tool.param}), which the provider runs itself and bills what each use reads (search results, the page fetched) as input: set its max_uses (${param}, at most ${LIMITS.maxToolUses.toLocaleString('en-US')}) so its budget can hold what the uses read.`,
    );
    if (!bound.ok) return bound;
    reads += bound.value;
    if (!most || bound.value > most.uses) most = { param, uses: bound.value };
  }
  return Ok({ reads, param: most?.param });
}

/**
 * Responses: `max_tool_calls` bounds the calls of all the provider-run tools together, and the
 * client must set it for any of them (OpenAI runs a response's tool calls until it is done):
 * held a read each call it permits, plus one for each tool whose calls the provider does not
 * count (an MCP server's tool list, an image generation), never fewer than one a tool.
 */
export function perCallReads(
  tools: readonly [ProviderTool, ...ProviderTool[]],
  maxToolCalls: unknown,
): Result<ToolReads, EdgeError> {
  const [first] = tools;
  const bound = clientBound(
    'max_tool_calls',
    'max_tool_calls',
    maxToolCalls,
    `This call offers ${first.what} (${first.param}), which the provider runs itself and bills what each of its calls reads (search results, tool output) as input: set max_tool_calls (at most ${LIMITS.maxToolUses.toLocaleString('en-US')}) so its budget can hold what the calls read.`,
  );
  if (!bound.ok) return bound;
  const once = tools.filter((t) => !t.counted).length;
  return Ok({ reads: Math.max(tools.length, bound.value + once), param: 'max_tool_calls' });
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
): ProviderTool[] {
  return (tools ?? []).flatMap((t, i) =>
    CLIENT_RESPONSES_TOOLS.has(t.type)
      ? []
      : [
          {
            param: `tools.${i}`,
            what: `the ${t.type} tool`,
            counted: toolUseKind('openai', t.type) !== undefined,
          },
        ],
  );
}
