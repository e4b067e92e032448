import { BASE_TIER, tierPrices, type CompiledModel, type UpstreamApi } from '@holdfast/config';
import { ServiceTierName } from '@holdfast/events';
import { Err, Ok, type Result } from '@holdfast/runtime';
import { EdgeError } from '../errors.js';
import { printable } from '../request/auth.js';

/** The `service_tier` values each API takes (OpenAI's Chat Completions and Responses; Messages). */
const ASKED: Record<UpstreamApi, readonly string[]> = {
  openai: ['auto', 'default', 'flex', 'scale', 'priority'],
  anthropic: ['auto', 'standard_only'],
};

const invalid = (message: string) =>
  Err(new EdgeError({ code: 'invalid_request', message, param: 'service_tier' }));

/**
 * The service tier a call is held at: the dearest the provider may serve it at, priced by the
 * model (docs/budgets.md, "How service tiers are priced").
 *
 * - `default`, Anthropic's `standard_only`: the base price.
 * - `auto` or none: the tier the project defaults to (`price.autoServiceTier`, else the base);
 *   on Messages `auto` may be served at Anthropic's Priority Tier, so a model that prices
 *   `priority` is held at it, and any other at the base (`autoServiceTier` is OpenAI's).
 * - `flex`: its price, or the base (dearer) when it has none.
 * - any other tier (`priority`, `scale`): its price; without one the call could cost more
 *   than any price states, so it is a 400 before anything is held.
 *
 * A value the API does not take (not a string, unknown, oversized) is a 400 too.
 */
export function heldServiceTier(
  asked: unknown,
  model: Pick<CompiledModel, 'id' | 'price' | 'pricePico' | 'tierPricePico'> | undefined,
  api: UpstreamApi,
): Result<string, EdgeError> {
  const known = ASKED[api];
  if (
    asked !== undefined &&
    asked !== null &&
    (typeof asked !== 'string' || !known.includes(asked))
  ) {
    const shown = typeof asked === 'string' ? `"${printable(asked.slice(0, 64))}"` : typeof asked;
    return invalid(`service_tier ${shown} is not one this API takes: ${known.join(', ')}.`);
  }
  const tier = asked ?? 'auto';
  const priced = (t: string) => model !== undefined && tierPrices(model, t) !== undefined;
  const auto = model?.price.autoServiceTier ?? BASE_TIER;
  switch (tier) {
    case 'default':
    case 'standard_only':
      return Ok(BASE_TIER);
    case 'auto':
      // Anthropic serves auto at standard or priority only (sent as standard_only when
      // priority has no price): a cheaper autoServiceTier would hold it under its bill.
      if (api === 'anthropic') return Ok(priced('priority') ? 'priority' : BASE_TIER);
      return Ok(auto);
    case 'flex':
      return Ok(priced('flex') ? 'flex' : BASE_TIER);
    default:
      if (priced(tier)) return Ok(tier);
      return invalid(
        `service_tier ${tier} is billed above the base price, and model ${model?.id ?? 'this model'} has no price for it: set price.serviceTiers.${tier} in its config (docs/configuration.md), or send service_tier default.`,
      );
  }
}

/**
 * The tier a provider reported serving a call at (a chat chunk's or a Responses object's
 * `service_tier`, Anthropic's `usage.service_tier`), when it is a tier name; else undefined
 * (the tier held is billed).
 */
export function reportedServiceTier(value: unknown): string | undefined {
  return ServiceTierName.safeParse(value).success ? (value as string) : undefined;
}
