import { z } from 'zod';

/**
 * Bounds on every amount that crosses a boundary. Redis Lua numbers are doubles, exact up to
 * 2^53 (about 9e15); these bounds keep every sum an authority computes below that.
 */
export const LIMITS = {
  /** Largest prompt a call may declare, in tokens. */
  maxPromptTokens: 4_000_000,
  /** Largest completion a call may ask for, in tokens. */
  maxOutputTokens: 1_000_000,
  /** Largest budget limit: tokens, or micro-USD for usd budgets ($1e9). */
  maxBudgetAmount: 1e15,
  /** Largest price, USD per million tokens. */
  maxPricePerMTok: 1_000,
  /** Longest lease of a hold, ms (24 h). */
  maxLeaseMs: 86_400_000,
  /**
   * Largest bound on the uses of one provider-run tool a call may be admitted with (Anthropic
   * `max_uses`, Responses `max_tool_calls`).
   */
  maxToolUses: 1_000,
  /** Largest count of one tool's uses a settlement may report (a provider past the bound). */
  maxReportedToolUses: 1_000_000,
} as const;

/** Units a budget counts in. `usd` budgets count integer micro-USD. */
const BUDGET_UNITS = ['tokens', 'usd'] as const;
export const BudgetUnit = z.enum(BUDGET_UNITS);
export type BudgetUnit = z.infer<typeof BudgetUnit>;

const BUDGET_WINDOWS = ['minute', 'day', 'month'] as const;
export const BudgetWindow = z.enum(BUDGET_WINDOWS);
export type BudgetWindow = z.infer<typeof BudgetWindow>;

const ADMISSION_MODES = ['meter', 'post', 'estimate', 'reserve', 'adaptive'] as const;
export const AdmissionMode = z.enum(ADMISSION_MODES);
export type AdmissionMode = z.infer<typeof AdmissionMode>;

/**
 * The API surface a call came in on (docs/api.md): OpenAI Chat Completions, OpenAI
 * Responses, Anthropic Messages, OpenAI embeddings. Events written before surfaces were
 * recorded carry none and read as `chat`.
 */
const API_SURFACES = ['chat', 'responses', 'messages', 'embeddings'] as const;
export const ApiSurface = z.enum(API_SURFACES);
export type ApiSurface = z.infer<typeof ApiSurface>;

/**
 * The provider-run tools billed per use, beside the tokens they read (docs/budgets.md, "How
 * tool fees are held and billed"): web search (OpenAI's `web_search*`, Anthropic's
 * `web_search_*`), file search and code interpreter (OpenAI), web fetch (Anthropic's
 * `web_fetch_*`, free today), image generation (OpenAI's `image_generation`, a use an image).
 * A model prices each in `price.toolUses`.
 */
export const TOOL_USE_KINDS = [
  'web_search',
  'file_search',
  'code_interpreter',
  'web_fetch',
  'image_generation',
] as const;
export const ToolUseKind = z.enum(TOOL_USE_KINDS);
export type ToolUseKind = z.infer<typeof ToolUseKind>;

/**
 * Micro-USD as dollars for people, every micro-dollar kept so two amounts never print alike
 * when they differ: 155 -> `$0.000155`, 2,500,000 -> `$2.50`, 2,504,000 -> `$2.504`.
 */
export function formatUsd(micro: number): string {
  const usd = Math.abs(micro) / 1_000_000;
  const text = usd.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 });
  return `${micro < 0 ? '-' : ''}$${text}`;
}
