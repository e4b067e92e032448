import {
  FEE_TOOL_KINDS,
  toolUseKind,
  toolUsePrices,
  type CompiledModel,
  type UpstreamApi,
} from '@holdfast/config';
import { LIMITS, type ToolUseKind } from '@holdfast/events';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';
import { printable } from '../request/auth.js';

/** The most uses of each provider-run tool billed per use a call may make. */
export type ToolUses = Partial<Record<ToolUseKind, number>>;

/**
 * The provider-run tools a request offers and the bound it sets on their uses, as its API
 * states it: Messages `max_uses` on each tool, Responses `max_tool_calls` across all of them
 * (with `partialImages`, an image_generation tool's `partial_images`, and `storedPrompt`, a
 * stored prompt the call names, whose tools the request does not show). Chat Completions
 * offers none: the model is the tool (`per: 'model'`), a search model (`searchModel`)
 * searching once on every call.
 */
export type OfferedTools =
  | { per: 'tool'; tools: readonly { type: string; param: string; maxUses: unknown }[] }
  | {
      per: 'call';
      tools: readonly { type: string; param: string; partialImages?: unknown }[];
      maxToolCalls: unknown;
      storedPrompt?: boolean;
    }
  | { per: 'model'; choices: number };

/** The uses a search model's call is held and billed: one web search, whatever it asks. */
export const SEARCH_MODEL_USES: Readonly<ToolUses> = { web_search: 1 };

const invalid = (param: string, message: string) =>
  Err(new EdgeError({ code: 'invalid_request', param, message }));

const shown = (v: unknown) =>
  typeof v === 'string' ? `"${printable(v.slice(0, 64))}"` : (JSON.stringify(v) ?? typeof v);

const isBound = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= LIMITS.maxToolUses;

/**
 * A bound the client set on a call's uses of provider-run tools (`max_uses` at `param`,
 * `max_tool_calls`), an integer from 1 to 1,000, or the 400 naming it: `missing` says why the
 * call needs it.
 */
export function clientBound(
  field: 'max_uses' | 'max_tool_calls',
  param: string,
  value: unknown,
  missing: string,
): Result<number, EdgeError> {
  if (value === undefined || value === null) return invalid(param, missing);
  if (isBound(value)) return Ok(value);
  const at = param === field ? '' : ` (${param})`;
  return invalid(
    param,
    `${field} ${shown(value)}${at} must be an integer from 1 to ${LIMITS.maxToolUses.toLocaleString('en-US')}.`,
  );
}

/**
 * The uses of provider-run tools billed per use a call is held for (docs/budgets.md, "How
 * tool fees are held and billed"), or the 400 that says why it cannot be: a tool that carries
 * a fee (web search, file search, code interpreter) the model does not price
 * (`price.toolUses.<tool>`), or a priced tool without a bound on its uses the client set
 * (`max_uses`, `max_tool_calls`: an integer from 1 to 1,000). The bound is never set for the
 * client: how many searches a call may pay for is the client's to say. Messages: each tool's
 * own `max_uses`. Responses: `max_tool_calls` bounds the calls of all its tools together, so
 * it is held at the dearest fee among them. Chat Completions: a search model's call, one web
 * search (the provider searches on every call; config makes sure it prices one).
 */
export function heldToolUses(
  offered: OfferedTools | undefined,
  model: (Pick<CompiledModel, 'id' | 'price'> & { searchModel?: boolean }) | undefined,
  api: UpstreamApi,
): Result<ToolUses, EdgeError> {
  if (!offered || !model) return Ok({});
  if (offered.per === 'model') {
    if (model.searchModel !== true) return Ok({});
    // Whether n choices search once or n times, no usage says; asked for one each, a call
    // could be billed searches it was not held for.
    if (offered.choices > 1) {
      return invalid(
        'n',
        `Model ${model.id} searches the web on every call and bills each search, and Holdfast cannot tell how many searches n=${offered.choices} choices make: a search model takes one choice a call. Make ${offered.choices} calls instead.`,
      );
    }
    return Ok({ ...SEARCH_MODEL_USES });
  }
  const prices = toolUsePrices(model);
  const billed: { kind: ToolUseKind; type: string; param: string; maxUses?: unknown }[] = [];
  for (const tool of offered.tools) {
    const kind = toolUseKind(api, tool.type);
    if (kind === undefined) continue;
    if (prices[kind] === undefined) {
      if (!FEE_TOOL_KINDS.has(kind)) continue;
      return invalid(
        tool.param,
        `This call offers the ${printable(tool.type.slice(0, 64))} tool (${tool.param}), which the provider bills per use, and model ${model.id} has no price for it: set price.toolUses.${kind} in its config (docs/configuration.md), or leave the tool out.`,
      );
    }
    const partial = 'partialImages' in tool ? tool.partialImages : undefined;
    if (kind === 'image_generation' && partial !== undefined && partial !== null && partial !== 0) {
      return invalid(
        `${tool.param}.partial_images`,
        `partial_images ${shown(partial)} (${tool.param}.partial_images): the provider bills each partial image beyond the image, at the image model's output price, which no usage reports and Holdfast cannot hold or bill. Leave partial_images out or set it to 0.`,
      );
    }
    billed.push({ kind, ...tool, type: printable(tool.type.slice(0, 64)) });
  }
  if (offered.per === 'call' && offered.storedPrompt === true) {
    const refused = storedPromptRefusal(prices, model.id);
    if (refused) return refused;
    for (const kind of FEE_TOOL_KINDS) billed.push({ kind, type: kind, param: 'prompt' });
  }
  if (billed.length === 0) return Ok({});
  const uses: ToolUses = {};
  if (offered.per === 'call') {
    const what =
      offered.storedPrompt === true
        ? 'names a stored prompt (prompt), whose tools the request does not show and the provider bills per call'
        : `offers the ${billed[0]!.type} tool, which the provider bills per call`;
    const max = clientBound(
      'max_tool_calls',
      'max_tool_calls',
      offered.maxToolCalls,
      `This call ${what}: set max_tool_calls (at most ${LIMITS.maxToolUses.toLocaleString('en-US')}) so its budget can hold what the calls cost.`,
    );
    if (!max.ok) return max;
    const dearest = billed.reduce((a, b) => (prices[b.kind]! > prices[a.kind]! ? b : a));
    uses[dearest.kind] = max.value;
    return Ok(uses);
  }
  for (const tool of billed) {
    const param = `${tool.param}.max_uses`;
    const max = clientBound(
      'max_uses',
      param,
      tool.maxUses,
      `This call offers the ${tool.type} tool (${tool.param}), which the provider bills per use: set its max_uses (${param}, at most ${LIMITS.maxToolUses.toLocaleString('en-US')}) so its budget can hold what the uses cost.`,
    );
    if (!max.ok) return max;
    const total = (uses[tool.kind] ?? 0) + max.value;
    if (total > LIMITS.maxToolUses) {
      return invalid(
        param,
        `The max_uses of this call's ${tool.kind} tools add up to ${total.toLocaleString('en-US')} (${param}), above ${LIMITS.maxToolUses.toLocaleString('en-US')}.`,
      );
    }
    uses[tool.kind] = total;
  }
  return Ok(uses);
}

/**
 * Why a Responses call naming a stored prompt (`prompt: {id}`) cannot be held, if it cannot:
 * the prompt may carry any of the tools billed per use (web search, file search, code
 * interpreter, image generation), which the request does not show, so the model must price
 * every one of them (held at `max_tool_calls` x the dearest); a kind it does not price would be
 * run and billed by the provider and not by Holdfast.
 */
function storedPromptRefusal(
  prices: ToolUses,
  model: string,
): Result<ToolUses, EdgeError> | undefined {
  const missing = [...FEE_TOOL_KINDS].filter((kind) => prices[kind] === undefined);
  if (missing.length === 0) return undefined;
  const fields = missing.map((kind) => `price.toolUses.${kind}`).join(', ');
  return invalid(
    'prompt',
    `This call names a stored prompt (prompt), which may carry tools the provider runs and bills per use (web search, file search, code interpreter, image generation) that the request does not show. Model ${model} ${missing.length === FEE_TOOL_KINDS.size ? 'prices none of them' : 'does not price all of them'}: its config must set ${fields} for stored prompts to be accepted (docs/configuration.md). Send the prompt's instructions and tools in the request instead.`,
  );
}
