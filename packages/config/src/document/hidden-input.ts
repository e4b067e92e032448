import { LIMITS } from '@holdfast/events';
import { z } from 'zod';

/**
 * Input Anthropic bills a Messages call that the request does not show, as the edge bounds it
 * when it counts the prompt itself (docs/budgets.md, "Input the request does not show"): the
 * tool-use system prompt it adds whenever `tools` is present, the definitions of the built-in
 * client tools a request names by type only (`{type: "bash_20250124", name: "bash"}`), and what
 * enabling citations adds to the system prompt. Each default covers every figure published for
 * it, with margin:
 * - `toolUse`: Anthropic documents 346 (tool_choice auto/none) and 313 (any/tool) for Claude 4-era
 *   models, 530 for Claude 3 Opus auto; newer models are reported larger (Sonnet 4.6 497 / 589,
 *   Opus 4.7 675 / 804, third-party counts);
 * - `bash`: 245 documented; `textEditor`: 700 documented;
 * - `computer`: the tool's 735 plus its own system prompt of 466-499, documented;
 * - `memory`: no published figure: a guess, a text-editor-sized definition plus the memory
 *   instructions Anthropic adds, with the most margin;
 * - `citations`: Anthropic says citations add to the system prompt, with no figure: a guess.
 */
export const HIDDEN_INPUT_TOKENS = {
  toolUse: 1_024,
  bash: 512,
  textEditor: 1_024,
  computer: 2_048,
  memory: 2_048,
  citations: 1_024,
} as const;
export type HiddenInputTokens = Record<keyof typeof HIDDEN_INPUT_TOKENS, number>;

/** A figure that can only be raised: below the default it would not cover what is published. */
const atLeast = (n: number) =>
  z
    .int()
    .min(n, {
      message: `must be at least ${n.toLocaleString('en-US')}, the default (it covers every published figure; a model's larger one raises it)`,
    })
    .max(LIMITS.maxPromptTokens)
    .optional();

/**
 * `models[].hiddenInputTokens`: the operator raises a figure where a newer model's is larger.
 * Read only where the edge counts a Messages prompt itself (any tokenizer but `upstream`, or
 * when Anthropic's count_tokens cannot answer).
 */
export const HiddenInputConfig = z.strictObject({
  toolUse: atLeast(HIDDEN_INPUT_TOKENS.toolUse),
  bash: atLeast(HIDDEN_INPUT_TOKENS.bash),
  textEditor: atLeast(HIDDEN_INPUT_TOKENS.textEditor),
  computer: atLeast(HIDDEN_INPUT_TOKENS.computer),
  memory: atLeast(HIDDEN_INPUT_TOKENS.memory),
  citations: atLeast(HIDDEN_INPUT_TOKENS.citations),
});

/** A model's figures: what it sets, the defaults for the rest. */
export function hiddenInputTokens(
  model: { hiddenInputTokens?: z.infer<typeof HiddenInputConfig> | undefined } | undefined,
): HiddenInputTokens {
  const set = model?.hiddenInputTokens ?? {};
  const D = HIDDEN_INPUT_TOKENS;
  return {
    toolUse: set.toolUse ?? D.toolUse,
    bash: set.bash ?? D.bash,
    textEditor: set.textEditor ?? D.textEditor,
    computer: set.computer ?? D.computer,
    memory: set.memory ?? D.memory,
    citations: set.citations ?? D.citations,
  };
}
