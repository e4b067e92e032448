import type { CompiledModel, CompiledTenant } from '@holdfast/config';
import { LIMITS } from '@holdfast/events';

/** The max_tokens a call is admitted with, and where it came from. */
export interface Clamp {
  /** What the client asked for (max_completion_tokens, else max_tokens), null when absent. */
  requested: number | null;
  /** The use case's ceiling, lowered to the model's max output. */
  ceiling: number;
  /** min(requested, ceiling), or the ceiling when nothing was asked. */
  maxTokens: number;
}

/**
 * Clamps max_tokens to the use case's ceiling and the model's max output (docs/api.md). An
 * unregistered use case or unknown model has no ceiling here; the call still goes to the
 * authority (which refuses it and records why) with the request bounded by the protocol limit.
 */
export function clampMaxTokens(
  requested: number | null,
  tenant: CompiledTenant,
  useCase: string,
  model: CompiledModel | undefined,
): Clamp {
  const ceilings: number[] = [LIMITS.maxOutputTokens];
  const uc = tenant.useCases.get(useCase);
  if (uc) ceilings.push(uc.maxTokens);
  if (model) ceilings.push(model.maxOutputTokens);
  const ceiling = Math.min(...ceilings);
  return { requested, ceiling, maxTokens: Math.min(requested ?? ceiling, ceiling) };
}
